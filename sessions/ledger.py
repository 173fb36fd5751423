"""The work ledger (issue 54, item 1): what a session's tool work did, written by code, not
remembered by a model. Files in their final state (read, created, edited, deleted, renamed),
commands and what came of them (a failure in the output counts, even when a pipe hid the exit
code), tests and their result, commits, pushes and tags, and the last failure word for word.

It is built from the reference agent's `read`, `bash`, `edit` and `write` tools, the MCP
tools of the session's servers (by their names and arguments: `read_file`, `git_commit` …) and
the bash executions a user ran. The handoff request hands it to the model as material, and the
document carries it as a section of agentweb's own, as it carries the guard's."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from . import shapes
from .content import EntryLike, Kind, Role, block_list, block_texts
from .context import bash_failed, in_context
from .tokens import estimate_tokens

HEADING = "Work ledger"
NOTE = "(written by agentweb from the session's tool calls; most recent first)"
BUDGET_TOKENS = 1_500  # the section's most: the oldest lines go first
SHOWN_COMMAND = 120  # characters of a command line shown

READS = {"read", "read_file", "view", "cat", "open_file", "read_text_file"}
WRITES = {"write", "write_file", "create_file", "create"}
EDITS = {"edit", "edit_file", "str_replace", "multi_edit", "apply_patch", "replace"}
DELETES = {"delete_file", "remove_file", "delete", "rm"}
MOVES = {"move_file", "rename_file", "move", "rename"}
SHELLS = {"bash", "shell", "run", "exec", "run_command", "execute_command", "terminal"}
PATH_KEYS = ("path", "file_path", "filePath", "filename", "file", "target")
SOURCE_KEYS = ("source", "from", "old_path", "src")
DESTINATION_KEYS = ("destination", "to", "new_path", "dest")

FAILURE = re.compile(
    r"error TS\d+|npm ERR!|\bFAILED\b|^FAIL\b|Traceback \(most recent call last\)|"
    r"^\s*(?:[\w.]+(?:Error|Exception)|error(?:\[E\d+\])?|fatal|panic):|"
    r"\b[1-9]\d* (?:failed|failing|errors?)\b|BUILD FAILURE|Command exited with code [1-9]",
    re.MULTILINE,
)
TESTS = re.compile(
    r"\b(?:pytest|py\.test|tox|jest|vitest|mocha|rspec|phpunit|ctest)\b|"
    r"\b(?:npm|yarn|pnpm|bun)(?: run)? test\b|\b(?:go|cargo|mvn|gradle|dotnet|mix) test\b|"
    r"\bmake (?:test|check)\b|\bunittest\b"
)
COUNTS = re.compile(r"\b(\d+) (passed|failed|failing|skipped|errors?|tests?)\b")
EXIT_CODE = re.compile(r"Command exited with code (\d+)")
LOOKS = {"ls", "cat", "grep", "rg", "find", "pwd", "echo", "head", "tail", "wc", "file", "tree"}
SEPARATORS = re.compile(r"\s*(?:&&|\|\||;)\s*")


@dataclass
class Step:
    """One tool call (or bash execution) and what came of it."""

    tool: str  # the tool's own name, an MCP tool's without its `mcp__server__` prefix
    arguments: dict[str, object]
    output: str
    error: bool  # the tool said so (a result's isError, an exit code other than 0)
    exit_code: int | None = None


@dataclass
class FileState:
    path: str
    state: str  # read, created, edited, deleted, renamed
    at: int
    renamed_to: str = ""
    verified: bool = False  # a later read, test or command confirmed it


@dataclass
class Run:
    command: str
    failed: bool
    at: int
    exit_code: int | None = None
    error: str = ""  # the failure's own line
    counts: str = ""  # a test run's "3 failed, 39 passed"
    test: bool = False


@dataclass
class Ledger:
    files: dict[str, FileState] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    shipped: list[tuple[int, str, bool]] = field(default_factory=list)  # at, what, confirmed

    def __bool__(self) -> bool:
        return bool(self.files or self.runs or self.shipped)

    def gone(self) -> dict[str, str]:
        """The files the work deleted or renamed, by path: what became of each."""
        return {
            path: "deleted later" if state.state == "deleted" else f"renamed to {state.renamed_to}"
            for path, state in self.files.items()
            if state.state in ("deleted", "renamed")
        }

    @property
    def last_failure(self) -> Run | None:
        failed = [run for run in self.runs if run.failed]
        return failed[-1] if failed else None

    def fixed(self, failure: Run) -> bool:
        """Whether the same command ran fine after `failure`."""
        return any(
            r.command == failure.command and not r.failed and r.at > failure.at for r in self.runs
        )


def steps(entries: Sequence[EntryLike]) -> Iterator[Step]:
    """The tool calls of `entries` (the session's branch) with their results, in order."""
    calls: dict[str, tuple[str, dict[str, object]]] = {}
    for entry in entries:
        if entry.kind != Kind.MESSAGE or not in_context(entry):
            continue
        message = shapes.part(entry.data, "message")
        if entry.role == Role.ASSISTANT:
            for block in block_list(entry.content):
                if block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                    arguments = block.get("arguments")
                    calls[block["id"]] = (
                        _tool_name(block.get("name")),
                        arguments if isinstance(arguments, dict) else {},
                    )
        elif entry.role == Role.TOOL_RESULT:
            call = calls.pop(shapes.text(message.get("toolCallId")), None)
            if call is not None:
                output = "\n".join(block_texts(entry.content))
                found = EXIT_CODE.search(output)
                code = int(found.group(1)) if found else None
                yield Step(*call, output, bool(message.get("isError")), code)
        elif entry.role == "bashExecution" and not message.get("cancelled"):
            code = message.get("exitCode")
            exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            command: dict[str, object] = {"command": shapes.text(message.get("command"))}
            output = shapes.text(message.get("output"))
            yield Step("bash", command, output, bash_failed(message), exit_code)


def _tool_name(name: object) -> str:
    """`mcp__git__git_commit` → `git_commit`; the reference agent's names as they are."""
    text = name if isinstance(name, str) else ""
    return text.split("__", 2)[2] if text.startswith("mcp__") and text.count("__") >= 2 else text


def ledger_of(entries: Sequence[EntryLike]) -> Ledger:
    """The ledger of a branch's tool work."""
    ledger = Ledger()
    for at, step in enumerate(steps(entries)):
        tool = step.tool.lower()
        if tool in SHELLS or isinstance(step.arguments.get("command"), str):
            _ran(ledger, at, step)
        elif tool.startswith("git_") or tool in ("commit", "push", "tag"):
            _git_tool(ledger, at, tool, step)
        else:
            _file_tool(ledger, at, tool, step)
    return ledger


def _path(arguments: dict[str, object], keys: Sequence[str] = PATH_KEYS) -> str:
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return _plain_path(value)
    return ""


def _plain_path(path: str) -> str:
    path = path.strip()
    return path[2:] if path.startswith("./") else path


def _file_tool(ledger: Ledger, at: int, tool: str, step: Step) -> None:
    if tool in MOVES:
        source, target = _path(step.arguments, SOURCE_KEYS), _path(step.arguments, DESTINATION_KEYS)
        if source and target and not step.error:
            _moved(ledger, at, source, target)
        return
    path = _path(step.arguments)
    if not path or step.error:  # an edit that did not apply changed nothing
        return
    known = ledger.files.get(path)
    if tool in READS:
        if known is None or known.state in ("deleted", "renamed"):
            ledger.files[path] = FileState(path, "read", at, verified=True)
        else:
            known.verified = True  # read back after it was written
    elif tool in WRITES:
        existed = known is not None and known.state in ("read", "edited")
        ledger.files[path] = FileState(path, "edited" if existed else "created", at)
    elif tool in EDITS:
        state = "created" if known is not None and known.state == "created" else "edited"
        ledger.files[path] = FileState(path, state, at)
    elif tool in DELETES:
        ledger.files[path] = FileState(path, "deleted", at, verified=True)


def _moved(ledger: Ledger, at: int, source: str, target: str) -> None:
    before = ledger.files.get(source)
    ledger.files[source] = FileState(source, "renamed", at, renamed_to=target, verified=True)
    state = before.state if before is not None and before.state != "read" else "created"
    ledger.files[target] = FileState(target, state, at)


def _git_tool(ledger: Ledger, at: int, tool: str, step: Step) -> None:
    """The git MCP server's tools (mcp-server-git): a commit, a push, a tag."""
    if "commit" in tool:
        message = step.arguments.get("message")
        what = f'commit "{message}"' if isinstance(message, str) else "commit"
        ledger.shipped.append((at, what, not step.error))
    elif "push" in tool or "tag" in tool:
        ledger.shipped.append((at, tool.removeprefix("git_"), not step.error))
    elif not step.error:
        _confirm(ledger, at)


def _ran(ledger: Ledger, at: int, step: Step) -> None:
    command = " ".join(str(step.arguments.get("command", "")).split())
    failure = FAILURE.search(step.output)
    failed = step.error or failure is not None
    test = TESTS.search(command) is not None
    run = Run(command, failed, at, step.exit_code, test=test, counts=_counts(step.output))
    if failed:
        run.error = _failure_line(step.output, failure)
    ledger.runs.append(run)
    if not failed:
        _confirm(ledger, at)
    for part in SEPARATORS.split(command):
        _shell_files(ledger, at, part, failed)
        _shipped(ledger, at, part, step.output, failed)


def _confirm(ledger: Ledger, at: int) -> None:
    """A command that succeeded confirms the files written before it."""
    for state in ledger.files.values():
        if state.at < at and state.state in ("created", "edited"):
            state.verified = True


def _counts(output: str) -> str:
    found: dict[str, str] = {}
    for number, word in COUNTS.findall(output):
        found.setdefault("failed" if word == "failing" else word, number)
    return ", ".join(f"{n} {w}" for w, n in found.items() if w in ("passed", "failed", "skipped"))


def _failure_line(output: str, failure: re.Match[str] | None) -> str:
    if failure is None:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""
    start = output.rfind("\n", 0, failure.start()) + 1
    end = output.find("\n", failure.end())
    return output[start : end if end >= 0 else len(output)].strip()[:300]


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unclosed quote: the words as they stand
        return command.split()


def _shell_files(ledger: Ledger, at: int, command: str, failed: bool) -> None:
    words = _words(command)
    if failed or not words:
        return
    if words[:2] in (["git", "rm"], ["git", "mv"]):
        words = words[1:]
    paths = [_plain_path(word) for word in words[1:] if not word.startswith("-")]
    if words[0] == "rm":
        for path in paths:
            ledger.files[path] = FileState(path, "deleted", at, verified=True)
    elif words[0] == "mv" and len(paths) == 2:
        _moved(ledger, at, paths[0], paths[1])
    elif words[0] == "touch":
        for path in paths:
            ledger.files.setdefault(path, FileState(path, "created", at))


def gone(commands: Iterable[str]) -> dict[str, str]:
    """The files that shell commands which succeeded deleted or renamed (`rm`, `mv`, `git rm`,
    `git mv`), by path: what became of each."""
    work = Ledger()
    for at, command in enumerate(commands):
        for part in SEPARATORS.split(" ".join(command.split())):
            _shell_files(work, at, part, failed=False)
    return work.gone()


def _shipped(ledger: Ledger, at: int, command: str, output: str, failed: bool) -> None:
    words = _words(command)
    if len(words) < 2 or words[0] != "git":
        return
    if words[1] == "commit":
        message = next((words[n + 1] for n, w in enumerate(words[:-1]) if w in ("-m", "-am")), "")
        ledger.shipped.append((at, f'commit "{message}"' if message else "commit", not failed))
    elif words[1] == "push":
        where = " ".join(w for w in words[2:] if not w.startswith("-"))
        ledger.shipped.append((at, f"push {where}".strip(), not failed))
    elif words[1] == "tag" and len(words) > 2 and not words[2].startswith("-"):
        ledger.shipped.append((at, f"tag {words[2]}", not failed))


def section(ledger: Ledger, budget: int = BUDGET_TOKENS) -> str:
    """The ledger as the document's section (empty: no tool work), within `budget` tokens: the
    most recent of each list first, the oldest left out when it runs short."""
    if not ledger:
        return ""
    files = sorted(ledger.files.values(), key=lambda state: -state.at)
    groups = [
        ("Commits, pushes and tags:", [_shipped_line(item) for item in reversed(ledger.shipped)]),
        ("Files, in their final state:", [_file_line(state) for state in files]),
        ("Commands and what came of them (the last run of each):", _run_lines(ledger.runs)),
    ]
    tail = []
    if (last := ledger.last_failure) is not None:
        fixed = " (since fixed)" if ledger.fixed(last) else ""
        tail = ["", f"Last failure{fixed}, word for word, of `{_shown(last.command)}`:"]
        tail.append("> " + (last.error or "(no output)"))
    used = estimate_tokens("\n".join([HEADING, NOTE, *tail]))
    body: list[str] = []
    for title, items in groups:
        if items:
            body += ["", title]
        for n, item in enumerate(items):
            cost = estimate_tokens(item) + 1
            if used + cost > budget:
                body.append(f"- … {len(items) - n} more left out")
                break
            body.append(item)
            used += cost
    return "\n".join([f"## {HEADING}", NOTE, *body, *tail])


def _shown(command: str) -> str:
    cut = command if len(command) <= SHOWN_COMMAND else command[: SHOWN_COMMAND - 1] + "…"
    return cut.replace("`", "'")


def _file_line(state: FileState) -> str:
    if state.state == "renamed":
        return f"- `{state.path}`: renamed to `{state.renamed_to}` (no longer there)"
    if state.state == "deleted":
        return f"- `{state.path}`: deleted (no longer there)"
    mark = "" if state.state == "read" else (" (verified)" if state.verified else " (attempted)")
    return f"- `{state.path}`: {state.state}{mark}"


def _run_lines(runs: Sequence[Run]) -> list[str]:
    """Each command once, at its last run, newest first, with how many runs failed; a look
    around that succeeded (`ls`, `git status` …) is left out."""
    last: dict[str, Run] = {}
    failures: dict[str, int] = {}
    for run in runs:
        last.pop(run.command, None)
        last[run.command] = run
        failures[run.command] = failures.get(run.command, 0) + run.failed
    lines = []
    for command, run in reversed(last.items()):
        if not run.failed and not run.test and _looks_around(command):
            continue
        lines.append(
            _run_line(run, sum(1 for r in runs if r.command == command), failures[command])
        )
    return lines


def _looks_around(command: str) -> bool:
    words = _words(command)
    first = words[0] if words else ""
    return first in LOOKS or words[:2] in (["git", w] for w in ("status", "log", "diff", "show"))


def _run_line(run: Run, runs: int, failures: int) -> str:
    history = f"; {failures} of {runs} runs failed" if runs > 1 and failures else ""
    if not run.failed:
        outcome = "passed" if run.test else "succeeded"
        counts = f" ({run.counts})" if run.counts else ""
        return f"- `{_shown(run.command)}`: {outcome}{counts}{history}"
    code = f"exit code {run.exit_code}" if run.exit_code else "failure in its output"
    counts = f", {run.counts}" if run.counts else ""
    return f"- `{_shown(run.command)}`: FAILED ({code}{counts}){history}: {run.error}"


def _shipped_line(shipped: tuple[int, str, bool]) -> str:
    _, what, confirmed = shipped
    return f"- {what}" + (" (verified)" if confirmed else " (attempted: it failed)")
