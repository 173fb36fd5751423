"""Realistic sessions of the reference agent, in its JSONL format (version 1 or 3).

A long coding session on a rate-limiting gateway: user requests in English and Chinese
(with emoji), assistant replies with thinking and tool calls, tool results holding whole
files, diffs, directory listings and failing test runs, the user's own bash executions,
images, model and thinking-level changes, an aborted reply, and two compactions. The
usage figures grow as the reference agent's would, and drop after each compaction.

A few facts matter (FACTS: what a handoff must carry); they are named by the user,
repeated, recent or part of an error. Everything else is the noise of real tool work.

Deterministic for a seed. Tests and benchmarks call `generate()`; from the shell:

    .venv/bin/python bench/make_session.py --version 3 --seed 7 > session.jsonl
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

CWD = "/home/dev/work/gateway"
MODELS = ("claude-sonnet-4-5", "claude-opus-4-1")

# What a handoff of this session must carry: (kind, text) as the coverage panel names them.
FACTS: tuple[tuple[str, str], ...] = (
    ("path", "src/limiter/slidingWindow.ts"),
    ("path", "src/config/limits.yaml"),
    ("path", "test/limiter.spec.ts"),
    ("path", "scripts/load-test.sh"),
    ("path", "legacy/billing_v1.ts"),
    ("identifier", "SlidingWindowLimiter"),
    ("identifier", "computeRetryAfter()"),
    ("identifier", "RATE_LIMIT_REDIS_URL"),
    ("error", "TypeError: Cannot read properties of undefined (reading 'windowMs')"),
    ("url", "https://github.com/acme/gateway/issues/481"),
    ("number", "120 ms"),
    ("number", "5000 req/s"),
    ("decision", "We decided to use Redis sorted sets instead of the token bucket."),
)

# How the session ends, planted: what a handoff must say of where the work stands. The stale
# steps are the Next Steps of its compactions, which the end of the session has done.
END_STATE: tuple[str, ...] = (
    "v2.3.1",  # the release tag it pushed
    "npm run publish",  # the command that failed last
    "error TS1005: ';' expected.",  # and the error line it failed with
)
STALE_STEPS: tuple[str, ...] = ("Make test/limiter.spec.ts pass", "run scripts/load-test.sh")

USER_ASKS = [
    "Can you look at {path} and tell me why {ident} is slow?",
    "Please refactor {ident} in {path}; keep the public API the same.",
    "Run the tests again and fix whatever fails in {path}.",
    "What does {ident} do when the window is empty? Check {path}.",
    "Add a test for {ident} to {test}.",
    "请看一下 {path} 里的 {ident}，为什么在高并发下会超时？🙏",
    "这个改动没问题，继续下一步吧 👍 顺便检查一下 {path}。",
    "The dashboard shows spikes again 😬 — check {path} and the metrics exporter.",
    "Rename {ident} to something clearer and update the callers.",
    "Make sure {ident} handles a Redis timeout gracefully.",
]
ASSISTANT_SAYS = [
    "I read `{path}`. `{ident}` walks the whole list on every call, so it is O(n) per "
    "request. I'll cache the window boundaries.",
    "The change is in. `{ident}` now returns early when the key has no entries; the tests "
    "in `{test}` pass.",
    "Done: I replaced the loop in `{ident}` with a single `ZREMRANGEBYSCORE` call and kept "
    "the exported names.",
    "The failure was a stale fixture in `{test}`; I regenerated it. Everything passes now.",
    "`{ident}` is only called from `{path}`, so renaming it is safe. I updated both places.",
    "I couldn't reproduce the spike locally; the p50 stays flat. I added a debug log to "
    "`{ident}` so we see it next time.",
]
THINKING = [
    "The user wants {ident} faster. Let me read {path} first, then check who calls it. "
    "Maybe the sorted-set trim happens twice per request.",
    "Tests failed in {test}. The fixture probably predates the refactor; I should check "
    "the snapshot before changing code.",
    "这里需要注意 {ident} 的并发行为。Redis pipeline should keep the round trips at one.",
    "I need to be careful with {path}: the user said legacy code is off limits.",
]
DIRS = ["src/limiter", "src/http", "src/metrics", "src/config", "src/util", "test", "scripts"]
WORDS = ["bucket", "window", "quota", "client", "route", "header", "retry", "metric",
         "sample", "policy", "burst", "tenant", "cache", "store", "clock", "drain"]  # fmt: skip
MIME = ["image/png", "application/json", "text/plain", "image/svg+xml", "text/html"]


@dataclass
class Writer:
    """Appends entries in the reference agent's shape, tracking ids, time and usage."""

    version: int
    rng: random.Random
    lines: list[dict[str, Any]] = field(default_factory=list)
    moment: datetime = field(default_factory=lambda: datetime(2025, 11, 3, 9, 0, tzinfo=UTC))
    last_id: str | None = None
    context_chars: int = 0
    model: str = MODELS[0]

    def header(self) -> None:
        header: dict[str, Any] = {
            "type": "session",
            "id": "5f0c2a9e-1d7b-4c11-9a43-8e2b6f1d0c77",
            "timestamp": self._stamp(),
            "cwd": CWD,
        }
        if self.version == 1:
            header.update(provider="anthropic", modelId=self.model, thinkingLevel="medium")
        else:
            header["version"] = self.version
        self.lines.append(header)

    def entry(self, kind: str, **fields: Any) -> str:
        self.moment += timedelta(seconds=self.rng.randint(2, 90))
        line: dict[str, Any] = {"type": kind}
        entry_id = f"{self.rng.getrandbits(32):08x}"
        if self.version >= 2:
            line.update(id=entry_id, parentId=self.last_id)
        line["timestamp"] = self._stamp()
        line.update(fields)
        self.lines.append(line)
        self.last_id = entry_id
        return entry_id

    def message(self, role: str, content: Any, **extra: Any) -> str:
        message = {"role": role, "content": content, **extra}
        message["timestamp"] = int(self.moment.timestamp() * 1000)
        self.context_chars += len(json.dumps(content, ensure_ascii=False))
        return self.entry("message", message=message)

    def user(self, text: str, image: str | None = None) -> str:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if image:
            content.append({"type": "image", "mimeType": image, "data": _image_data(self.rng)})
        return self.message("user", content)

    def assistant(self, blocks: list[dict[str, Any]], *, stop: str = "stop", **extra: Any) -> str:
        output = self.rng.randint(80, 900)
        context = self.context_chars // 4 + 6_000  # system prompt and tool definitions
        cache_read = int(context * 0.9)
        usage = {
            "input": context - cache_read,
            "output": output,
            "cacheRead": cache_read,
            "cacheWrite": self.rng.randint(200, 3_000),
            "totalTokens": context + output,
            "cost": {"input": 0.01, "output": 0.02, "cacheRead": 0.003, "cacheWrite": 0.004,
                     "total": 0.037},
        }  # fmt: skip
        return self.message(
            "assistant",
            blocks,
            api="anthropic-messages",
            provider="anthropic",
            model=self.model,
            usage=usage,
            stopReason=stop,
            **extra,
        )

    def tool_result(self, call_id: str, name: str, text: str, *, error: bool = False) -> str:
        return self.message(
            "toolResult",
            [{"type": "text", "text": text}],
            toolCallId=call_id,
            toolName=name,
            isError=error,
        )

    def bash(self, command: str, output: str, exit_code: int) -> str:
        self.context_chars += len(command) + len(output)
        self.moment += timedelta(seconds=3)
        return self.entry(
            "message",
            message={
                "role": "bashExecution",
                "command": command,
                "output": output,
                "exitCode": exit_code,
                "cancelled": False,
                "truncated": False,
                "timestamp": int(self.moment.timestamp() * 1000),
            },
        )

    def compaction(self, summary: str, first_kept: str, first_kept_index: int) -> str:
        tokens_before = self.context_chars // 4 + 6_000
        fields: dict[str, Any] = {"summary": summary, "tokensBefore": tokens_before}
        if self.version == 1:
            fields["firstKeptEntryIndex"] = first_kept_index
        else:
            fields["firstKeptEntryId"] = first_kept
        entry = self.entry("compaction", **fields)
        return entry

    def _stamp(self) -> str:
        return self.moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _image_data(rng: random.Random) -> str:
    return base64.b64encode(rng.randbytes(600)).decode()


def _name(rng: random.Random) -> str:
    return rng.choice(WORDS) + rng.choice(WORDS).capitalize()


def _file(rng: random.Random, path: str, lines: int) -> str:
    """A TypeScript-looking file: imports, a class, functions, comments."""
    out = [
        f"// {path}",
        "import { createClient } from 'redis';",
        f"import {{ {_name(rng)} }} from '../util/{rng.choice(WORDS)}';",
        "",
        f"export class {_name(rng).capitalize()}Store {{",
    ]
    while len(out) < lines:
        name = _name(rng)
        out += [
            f"  async {name}(key: string, now = Date.now()): Promise<number> {{",
            f"    const {rng.choice(WORDS)} = await this.redis.zCount(key, now - this.windowMs,"
            " now);",
            f"    if ({rng.choice(WORDS)}_count > this.limit) return this.{_name(rng)}(key);",
            f"    // {rng.choice(WORDS)}s are trimmed lazily; see the {rng.choice(WORDS)} notes",
            f"    return {rng.randint(1, 999)};",
            "  }",
        ]
    return "\n".join(out + ["}"])


def _listing(rng: random.Random) -> str:
    rows = []
    for _ in range(rng.randint(12, 30)):
        folder = rng.choice(DIRS)
        rows.append(
            f"{rng.randint(100, 99_999):>6}  {folder}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.ts"
            f"  {rng.choice(MIME)}"
        )
    return "\n".join(rows)


def _diff(rng: random.Random, path: str) -> str:
    body = []
    for _ in range(rng.randint(6, 20)):
        word = rng.choice(WORDS)
        body += [f"-  const {word} = legacy{word.capitalize()}(key);",
                 f"+  const {word} = await this.{_name(rng)}(key, now);"]  # fmt: skip
    return (
        f"--- a/{path}\n+++ b/{path}\n@@ -{rng.randint(1, 200)},12 +{rng.randint(1, 200)},14 @@\n"
        + ("\n".join(body))
    )


def _test_run(rng: random.Random, failing: bool, fact_error: bool) -> str:
    lines = [f"> gateway@2.{rng.randint(0, 9)}.0 test", "> vitest run", ""]
    for _ in range(rng.randint(8, 25)):
        lines.append(f" ✓ test/{rng.choice(WORDS)}.spec.ts ({rng.randint(2, 40)} tests) "
                     f"{rng.randint(5, 900)}ms")  # fmt: skip
    if failing:
        error = (
            "TypeError: Cannot read properties of undefined (reading 'windowMs')"
            if fact_error
            else f"AssertionError: expected {rng.randint(1, 99)} to be {rng.randint(100, 200)}"
        )
        lines += [
            " ❯ test/limiter.spec.ts (14 tests | 1 failed)",
            f"   × SlidingWindowLimiter > {rng.choice(WORDS)}s a burst",
            f"     → {error}",
            "       at SlidingWindowLimiter.check (src/limiter/slidingWindow.ts:88:31)",
            "       at processTicksAndRejections "
            f"(node:internal/process/task_queues:{rng.randint(60, 99)}:5)",
            "",
            " Test Files  1 failed | 23 passed (24)",
        ]
    else:
        lines.append(" Test Files  24 passed (24)")
    return "\n".join(lines)


def _summary(rng: random.Random, part: int) -> str:
    return "\n".join(
        [
            "## Goal",
            "Replace the gateway's token bucket with a sliding-window limiter that holds 5000 "
            "req/s per tenant.",
            "",
            "## Constraints & Preferences",
            "- Node 18 only; keep p95 latency under 120 ms.",
            "- Never touch legacy/billing_v1.ts.",
            "",
            "## Progress",
            "### Done",
            f"- [x] SlidingWindowLimiter in src/limiter/slidingWindow.ts (part {part})",
            "- [x] limits moved to src/config/limits.yaml",
            "### In Progress",
            "- [ ] fix TypeError: Cannot read properties of undefined (reading 'windowMs')",
            "",
            "## Key Decisions",
            "- **Redis sorted sets instead of the token bucket**: exact windows, one round trip.",
            "",
            "## Next Steps",
            "1. Make test/limiter.spec.ts pass; 2. run scripts/load-test.sh.",
            "",
            "## Critical Context",
            "- RATE_LIMIT_REDIS_URL must be set; see https://github.com/acme/gateway/issues/481",
            f"- Note {rng.randint(1, 99)}: computeRetryAfter() rounds up to whole seconds.",
        ]
    )


def _episode(w: Writer, rng: random.Random, n: int, total: int) -> str:
    """One request and the tool work it takes. Returns the id of its user message."""
    main_path = rng.choice(
        ["src/limiter/slidingWindow.ts", f"{rng.choice(DIRS)}/{rng.choice(WORDS)}_{n}.ts"]
    )
    ident = rng.choice(["SlidingWindowLimiter", f"{_name(rng)}{n}", "computeRetryAfter()"])
    test = rng.choice(["test/limiter.spec.ts", f"test/{rng.choice(WORDS)}_{n}.spec.ts"])
    fill = {"path": main_path, "ident": ident, "test": test}
    image = rng.choice(MIME[:1] + ["image/jpeg"]) if n % 37 == 5 else None
    first = w.user(rng.choice(USER_ASKS).format(**fill), image=image)

    thinking = {"type": "thinking", "thinking": rng.choice(THINKING).format(**fill),
                "thinkingSignature": f"sig{rng.getrandbits(64):x}"}  # fmt: skip
    call = f"toolu_{rng.getrandbits(48):012x}"
    w.assistant(
        [thinking, {"type": "text", "text": f"Let me read `{main_path}` first."},
         {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": main_path}}],
        stop="toolUse",
    )  # fmt: skip
    w.tool_result(call, "read", _file(rng, main_path, rng.randint(110, 280)))

    if n % 3 == 0:
        call = f"toolu_{rng.getrandbits(48):012x}"
        w.assistant(
            [{"type": "toolCall", "id": call, "name": "bash",
              "arguments": {"command": f"ls -la {rng.choice(DIRS)} && file --mime-type *"}}],
            stop="toolUse",
        )  # fmt: skip
        w.tool_result(call, "bash", _listing(rng))

    call = f"toolu_{rng.getrandbits(48):012x}"
    edit_path = "./" + main_path if n % 4 == 0 else main_path
    w.assistant(
        [{"type": "toolCall", "id": call, "name": "edit",
          "arguments": {"path": edit_path, "oldText": f"legacy{_name(rng)}(key)",
                        "newText": f"await this.{_name(rng)}(key, now)"}}],
        stop="toolUse",
    )  # fmt: skip
    if n % 11 == 4:
        w.tool_result(
            call, "edit", f"Could not find the exact text in {edit_path}. The old text must "
            "match exactly including all whitespace and newlines.", error=True
        )  # fmt: skip
    else:
        w.tool_result(call, "edit", _diff(rng, main_path))

    failing = n % 4 == 1
    call = f"toolu_{rng.getrandbits(48):012x}"
    w.assistant(
        [{"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": "npm test"}}],
        stop="toolUse",
    )
    w.tool_result(call, "bash", _test_run(rng, failing, fact_error=failing and n % 8 == 1),
                  error=failing)  # fmt: skip

    if n == total - 3:  # the last word on the failure: recent, and named in an error
        w.user(
            "Still failing: TypeError: Cannot read properties of undefined (reading 'windowMs') "
            "in src/limiter/slidingWindow.ts — computeRetryAfter() gets called before the "
            "config from src/config/limits.yaml is loaded."
        )
        w.assistant([{"type": "text", "text": "Right: the limiter is constructed before the "
                      "config loads. I'll pass the window in explicitly next."}])  # fmt: skip
    elif n % 10 == 7:
        w.assistant(
            [{"type": "text", "text": "I was about to change the retry logic, but"}],
            stop="aborted",
        )
    else:
        w.assistant([{"type": "text", "text": rng.choice(ASSISTANT_SAYS).format(**fill)}])
    return first


def generate(
    *, version: int = 3, seed: int = 7, episodes: int = 140, realistic: bool = False
) -> list[str]:
    """The session file's lines (without newlines): at least 1,000 entries and 2 MB by default.
    `realistic`: with the material real sessions hold near their end (`_realistic`)."""
    rng = random.Random(seed)
    w = Writer(version=version, rng=rng)
    w.header()
    w.user(
        "We're replacing the gateway's token bucket with a sliding-window limiter. Hard "
        "constraints: Node 18 only, keep p95 latency under 120 ms at 5000 req/s, and never touch "
        "legacy/billing_v1.ts. Background: https://github.com/acme/gateway/issues/481"
    )
    w.assistant([{"type": "text", "text": "Understood. I'll start by reading the current "
                  "limiter and its tests."}])  # fmt: skip
    w.user("We decided to use Redis sorted sets instead of the token bucket. Keep the Redis URL "
           "in RATE_LIMIT_REDIS_URL.")  # fmt: skip
    w.assistant([{"type": "text", "text": "Good: sorted sets give exact windows. I'll add "
                  "SlidingWindowLimiter in src/limiter/slidingWindow.ts."}])  # fmt: skip
    starts: list[tuple[str, int]] = []
    compaction_at = {episodes * 2 // 5, episodes * 3 // 4}
    for n in range(episodes):
        index = len(w.lines)  # the file's line number of the episode's user message
        starts.append((_episode(w, rng, n, episodes), index))
        if n == episodes // 5:
            w.entry("model_change", provider="anthropic", modelId=MODELS[1])
            w.model = MODELS[1]
        if n == episodes // 2:
            w.entry("thinking_level_change", thinkingLevel="high")
            w.entry("model_change", provider="anthropic", modelId=MODELS[0])
            w.model = MODELS[0]
        if n % 9 == 2:
            status = (
                " M src/limiter/slidingWindow.ts\n?? scripts/load-test.sh\n"
                f" M src/config/limits.yaml\n M {rng.choice(DIRS)}/{rng.choice(WORDS)}.ts"
            )
            w.bash("git status --short", status, 0)
        if n % 13 == 6:
            w.bash("scripts/load-test.sh --rate 5000", "p50=41ms p95=" + str(rng.randint(95, 180))
                   + "ms errors=0.0" + str(rng.randint(1, 9)) + "%", 1 if n % 2 else 0)  # fmt: skip
        if n in compaction_at:
            kept_id, kept_index = starts[max(0, n - 4)]
            w.compaction(_summary(rng, len(starts)), kept_id, kept_index)
            w.context_chars = len(_summary(rng, 0)) + sum(
                len(json.dumps(line, ensure_ascii=False)) for line in w.lines[kept_index:]
            )
    if realistic:
        _realistic(w, rng)
    w.user("Before we go on: run scripts/load-test.sh and tell me if p95 is still under 120 ms.")
    _end_state(w, rng)
    return [json.dumps(line, ensure_ascii=False) for line in w.lines]


def _end_state(w: Writer, rng: random.Random) -> None:
    """The session's last steps: the load test passes and test/limiter.spec.ts with it (the
    compactions' next steps, done), a release tag is pushed, and the publish fails on a
    compiler error. The session ends there, on the failure."""
    shell = [
        ("scripts/load-test.sh --rate 5000", "p50=38ms p95=104ms errors=0.00%", False),
        ("npx vitest run test/limiter.spec.ts",
         " ✓ test/limiter.spec.ts (14 tests) 212ms\n\n Test Files  1 passed (1)", False),
    ]  # fmt: skip
    _run_shell(w, rng, shell)
    w.assistant([{"type": "text", "text": "p95 is 104 ms, under 120 ms, and test/limiter.spec.ts "
                  "passes: all 14 tests."}])  # fmt: skip
    w.user("Great. Tag v2.3.1, push the tag, then publish the package to npm.")
    release = [
        ("git tag v2.3.1 && git push origin v2.3.1",
         "To github.com:acme/gateway.git\n * [new tag]         v2.3.1 -> v2.3.1", False),
        ("npm run publish",
         "> gateway@2.3.1 publish\n> tsc -p tsconfig.build.json && npm publish\n\n"
         "src/limiter/retryAfter.ts(42,17): error TS1005: ';' expected.\n\n"
         "Found 1 error in src/limiter/retryAfter.ts:42\n\nnpm ERR! code ELIFECYCLE", True),
    ]  # fmt: skip
    _run_shell(w, rng, release)


# What `_realistic` plants, as the continuation bench asks for it.
DASHBOARD = ("#2E3440", "#88C0D0", "250 ms")  # values the user dictates, once
REJECTED = "We decided to use queueMessage instead of appendMessage for the retry notices."
ADOPTED = "use appendMessage directly"
DELETED = "src/limiter/main-new.ts"
PIPED_BUILD = "npm run build 2>&1 | tee build.log"
PIPED_ERROR = "error TS2305"
FIXED = "npm run lint"


def _realistic(w: Writer, rng: random.Random) -> None:
    """What real sessions hold and a handoff gets wrong: values the user dictates once, a
    decision they turn down, a file written and deleted again, a build whose failure a pipe
    hides (its result not marked an error), and a failure fixed by a later run."""
    w.user(
        "For the limiter dashboard use #2E3440 for the background and #88C0D0 for the accent "
        "lines; the alert threshold is 250 ms."
    )
    w.assistant([{"type": "text", "text": REJECTED}])
    w.user("why would we queue and then append? Just use appendMessage directly.")
    w.assistant([{"type": "text", "text": f"Right: we'll {ADOPTED} for the retry notices, "
                  "no queue."}])  # fmt: skip
    call = f"toolu_{rng.getrandbits(48):012x}"
    w.assistant(
        [{"type": "toolCall", "id": call, "name": "write",
          "arguments": {"path": DELETED, "content": "export const draft = true;\n"}}],
        stop="toolUse",
    )  # fmt: skip
    w.tool_result(call, "write", f"Successfully wrote 27 bytes to {DELETED}")
    build = (
        "> gateway@2.3.1 build\n> tsc -p tsconfig.json\n\n"
        "src/limiter/notices.ts(3,10): error TS2305: Module '\"./queue\"' has no exported member "
        "'queueMessage'.\n\nFound 1 error in src/limiter/notices.ts:3"
    )
    _run_shell(
        w,
        rng,
        [
            (f"rm {DELETED}", "", False),
            (PIPED_BUILD, build, False),  # exit code 0: tee's
            (FIXED, "src/limiter/notices.ts\n  3:10  error  'queue' is defined but never used\n"
             "\n✖ 1 problem (1 error, 0 warnings)", True),
            (FIXED, "", False),
        ],
    )  # fmt: skip


def _run_shell(w: Writer, rng: random.Random, runs: list[tuple[str, str, bool]]) -> None:
    """Each command as the assistant's bash tool call, and its output as the result."""
    for command, output, failed in runs:
        call = f"toolu_{rng.getrandbits(48):012x}"
        w.assistant(
            [{"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": command}}],
            stop="toolUse",
        )
        w.tool_result(call, "bash", output, error=failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", type=int, choices=(1, 3), default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--episodes", type=int, default=140)
    parser.add_argument("--realistic", action="store_true", help="plant `_realistic`'s material")
    args = parser.parse_args()
    lines = generate(
        version=args.version, seed=args.seed, episodes=args.episodes, realistic=args.realistic
    )
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
