"""Can the next session continue from the handoff? Probes the offline document the way the peers'
studies do (issue 54, item 6): questions the next session must answer, in four kinds, each with
the answer the session planted, word for word.

  recall        a fact stated once (a value the user dictated, a constraint, a link)
  artifact      which files, which commands, what came of them
  continuation  what to do next
  decision      what was decided, and that what was turned down is not carried as current

Each probe is scored on the document alone, and on the document plus recall (offline: the
answer is in what `recall` finds for the probe's keywords in the session it came from). The
session is `bench/make_session.py`'s with its realistic material (`--realistic`). With
BENCH_REAL_SESSIONS=dir, each `.jsonl` there is handed off too, and the 20 most salient items
the model's text did not carry are listed for a person to judge.

Run: .venv/bin/python bench/continuation.py [--episodes 140]
Targets (offline, with recall): artifact >= 95 %, decision >= 90 % with no superseded decision
carried as current, every kind >= 90 %.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import harness

harness.setup()  # a throwaway SQLite file, or BENCH_DATABASE_URL

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from make_session import (  # noqa: E402
    ADOPTED,
    DASHBOARD,
    DELETED,
    FIXED,
    PIPED_ERROR,
    REJECTED,
    generate,
)

from sessions import coverage, handoff, recall, store  # noqa: E402
from sessions.agent import AgentSession  # noqa: E402
from sessions.models import ChatSession  # noqa: E402
from sessions.session_file import import_jsonl  # noqa: E402


@dataclass(frozen=True)
class Probe:
    kind: str
    question: str
    keywords: str  # what the next session would recall with
    answer: str  # planted, word for word


PROBES = (
    Probe(
        "recall",
        "What background colour did the user ask for?",
        "dashboard background",
        DASHBOARD[0],
    ),
    Probe("recall", "What accent colour did the user ask for?", "accent lines", DASHBOARD[1]),
    Probe("recall", "What is the alert threshold?", "alert threshold", DASHBOARD[2]),
    Probe(
        "recall",
        "Which environment variable holds the Redis URL?",
        "Redis URL",
        "RATE_LIMIT_REDIS_URL",
    ),
    Probe(
        "recall",
        "Which issue describes the work?",
        "issues background",
        "https://github.com/acme/gateway/issues/481",
    ),
    Probe("recall", "What p95 latency must hold?", "p95 latency", "120 ms"),
    Probe("recall", "What rate must it hold?", "req/s rate", "5000 req/s"),
    Probe(
        "recall", "Which file must never be touched?", "never touch legacy", "legacy/billing_v1.ts"
    ),
    Probe(
        "artifact",
        "Which file holds the limiter?",
        "SlidingWindowLimiter file",
        "src/limiter/slidingWindow.ts",
    ),
    Probe("artifact", "Which file holds the limits?", "limits config", "src/config/limits.yaml"),
    Probe(
        "artifact", "Which test file covers the limiter?", "limiter spec", "test/limiter.spec.ts"
    ),
    Probe("artifact", "Which script runs the load test?", "load test", "scripts/load-test.sh"),
    Probe("artifact", "Which tag was pushed?", "tag pushed", "v2.3.1"),
    Probe("artifact", "Which command failed last?", "publish failed", "npm run publish"),
    Probe(
        "artifact", "With which error did it fail?", "publish error", "error TS1005: ';' expected."
    ),
    Probe("artifact", "Did the piped build pass?", "build tee", PIPED_ERROR),
    Probe("artifact", "Is the draft file still there?", "main-new", f"`{DELETED}`: deleted"),
    Probe("artifact", "Does the lint pass now?", "lint", f"`{FIXED}`: succeeded"),
    Probe(
        "continuation", "What must be done next?", "publish", "Fix the failing `npm run publish`"
    ),
    Probe(
        "continuation", "What did the user ask last?", "publish npm", "publish the package to npm"
    ),
    Probe(
        "decision",
        "Which data structure was chosen?",
        "sorted sets",
        "Redis sorted sets instead of the token bucket",
    ),
    Probe("decision", "How do retry notices go out?", "retry notices", ADOPTED),
)
SUPERSEDED = (REJECTED,)  # decided, then turned down: never a current decision
TARGETS = {"artifact": 95, "decision": 90, "recall": 90, "continuation": 90}


def hand_off(owner: User, lines: list[str]) -> tuple[ChatSession, ChatSession, str]:
    """The session imported from `lines`, the session its offline handoff started, and the
    document that session starts with."""
    old = import_jsonl(owner, lines)
    result = asyncio.run(AgentSession(old).handoff())
    assert result.new_session is not None, "the handoff did not switch"
    return old, result.new_session, result.document


def recalled(new: ChatSession, keywords: str) -> str:
    return "\n".join(hit.text for hit in recall.recall(new, keywords))


def score(new: ChatSession, document: str) -> None:
    alone: dict[str, list[bool]] = defaultdict(list)
    helped: dict[str, list[bool]] = defaultdict(list)
    for probe in PROBES:
        in_document = probe.answer in document
        alone[probe.kind].append(in_document)
        helped[probe.kind].append(in_document or probe.answer in recalled(new, probe.keywords))
    decisions = document.split("## Key Decisions", 1)[-1].split("\n## ", 1)[0]
    stale = sum(text in decisions for text in SUPERSEDED)
    print(f"{len(PROBES)} probes; superseded decisions carried as current: {stale} (target 0)")
    print(f"  {'kind':13} {'probes':>6} {'document':>9} {'+ recall':>9} {'target':>7}")
    for kind, target in TARGETS.items():
        n = len(alone[kind])
        doc, rec = (round(100 * sum(x[kind]) / n) for x in (alone, helped))
        met = "met" if rec >= target else "NOT MET"
        print(f"  {kind:13} {n:6} {doc:8}% {rec:8}% {target:6}%  {met}")
    for probe in PROBES:
        if probe.answer not in document and probe.answer not in recalled(new, probe.keywords):
            print(f"  missed ({probe.kind}): {probe.question} → {probe.answer!r}")


def judge_real(owner: User, folder: Path) -> None:
    """The reference's own sessions: the 20 most salient items the model's text dropped."""
    for path in sorted(folder.glob("*.jsonl")):
        old, _, document = hand_off(owner, path.read_text().splitlines())
        report = coverage.coverage(store.branch_rows(old), document, old.cwd)
        dropped = [item for item in report.items if not item.carried][:20]
        print(f"\n{path.name}: {report.score}% weighted; the top 20 not carried by the model:")
        for item in dropped:
            mark = " (appended by agentweb)" if item.appended else ""
            print(f"  {item.kind_label}: {item.text}{mark} — {', '.join(item.reasons)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=140)
    args = parser.parse_args()
    settings.ANTHROPIC_API_KEY = ""  # the offline model writes the document
    call_command("migrate", verbosity=0)
    User.objects.filter(username="continuer").delete()
    owner = User.objects.create_user("continuer")
    lines = generate(episodes=args.episodes, realistic=True)
    _, new, document = hand_off(owner, lines)
    print(f"{connection_label()}, a generated session of {len(lines):,} lines, offline document:")
    score(new, handoff.unwrap(document) if "<handoff-context>" in document else document)
    if real := os.environ.get("BENCH_REAL_SESSIONS"):
        judge_real(owner, Path(real))


def connection_label() -> str:
    from django.db import connection

    return connection.vendor


if __name__ == "__main__":
    main()
