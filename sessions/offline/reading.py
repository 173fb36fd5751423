"""How the offline model reads a conversation: what the user asked, what the assistant said and
did, what the commands it ran came to, and what earlier summaries kept, each told apart by the
labels the context gives them (sessions.context)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import todos
from ..content import block_texts
from ..context import BRANCH_SUMMARY_PREFIX, COMPACTION_PREFIX
from ..items import ERROR, Piece
from ..ledger import FAILURE

TOOL_RESULT = re.compile(r"^\[Tool result: ([^\]\n,]*)(, error)?\]: ", re.DOTALL)
TOOL_CALL = re.compile(r'^\[Assistant tool call\]: (\w+)\((?:\w+=)?("(?:[^"\\]|\\.)*")?')
ARGUMENT_NAME = re.compile(r"\b\w+=")
RAN = re.compile(  # a bash execution, as the context gives it (context.bash_text)
    r"^Ran `(?P<command>[^`]*)`\n(?P<output>.*?)"
    r"(?:\n\nCommand exited with code (?P<code>-?\d+))?$",
    re.DOTALL,
)
SHELLS = frozenset({"bash", "shell", "sh", "run", "exec", "terminal", "command"})
EXIT_CODE = re.compile(r"(?:exited with|exit) (?:code|status) (-?\d+)")


@dataclass(frozen=True)
class Run:
    """A command the session ran, and what it came to."""

    command: str
    ok: bool
    output: str
    at: int  # where in the reading it came (the index of its result's piece)

    @property
    def error_line(self) -> str:
        """The line of its output that says what went wrong: the first that names an error,
        else the last that says anything."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        named = next((line for line in lines if ERROR.search(line)), "")
        return (named or (lines[-1] if lines else ""))[:300]


@dataclass(frozen=True)
class Said:
    """A request of the user's, or a reply of the assistant's, and where it came."""

    text: str
    at: int


@dataclass
class Reading:
    """A conversation as the offline model understands it."""

    pieces: list[Piece] = field(default_factory=list)  # every text, labelled by source
    requests: list[Said] = field(default_factory=list)  # what the user typed
    replies: list[Said] = field(default_factory=list)  # what the assistant said
    summaries: list[Said] = field(default_factory=list)  # compactions, notes, earlier handoffs
    runs: list[Run] = field(default_factory=list)  # the commands run, oldest first
    pending: str | None = None  # the command of a shell call whose result has not come yet

    @property
    def at(self) -> int:
        return len(self.pieces)


def read(history: Iterable[dict[str, Any]], own_words: Callable[[str], str]) -> Reading:
    reading = Reading()
    for message in history:
        for text in block_texts(message.get("content", "")):
            if message.get("role") == "assistant":
                _read_assistant(reading, own_words(text))
            else:
                _read_user(reading, text)
    return reading


def _read_user(reading: Reading, text: str) -> None:
    at = reading.at
    if match := TOOL_RESULT.match(text):
        output, failed = text[match.end() :], bool(match.group(2))
        reading.pieces.append(Piece(output, "tool_result", at, failed))
        command, reading.pending = reading.pending, None
        if command is not None and match.group(1).strip() in SHELLS:
            reading.runs.append(Run(command, not failed and not _failed(output), output, at))
    elif ran := RAN.match(text):
        command, output = ran["command"], ran["output"]
        failed = ran["code"] not in (None, "0") or _failed(output)
        reading.pieces += [
            Piece(command, "bash_command", at),
            Piece(output, "tool_result", at, failed),
        ]
        reading.runs.append(Run(command, not failed, output.strip("`\n"), at))
    elif todos.is_note(text) or todos.is_reminder(text):
        return  # agentweb's word on the todo list, not a request: the list itself carries it
    elif summary := _summary_in(text):
        reading.summaries.append(Said(summary, at))
        reading.pieces.append(Piece(summary, "summary", at))
    else:
        reading.requests.append(Said(text, at))
        reading.pieces.append(Piece(text, "user", at))


def _failed(output: str) -> bool:
    """Output that says its command failed, though the result was not marked an error: an exit
    code, or failure text (a compiler's error code, `npm ERR!`, a traceback) that a pipe kept
    from the exit code."""
    code = EXIT_CODE.search(output)
    return bool(code and code.group(1) != "0") or FAILURE.search(output) is not None


def _summary_in(text: str) -> str:
    """The summary a user-side text carries: a compaction's, a branch's, notes, a handoff."""
    for prefix in (COMPACTION_PREFIX, BRANCH_SUMMARY_PREFIX):
        if text.startswith(prefix):
            return text[len(prefix) :].replace("</summary>", "").strip()
    for opening, closing in (("<notes>", "</notes>"), ("<handoff-context>", "</handoff-context>")):
        if opening in text and closing in text:
            return text.split(opening, 1)[1].split(closing, 1)[0].strip()
    return ""


def _read_assistant(reading: Reading, text: str) -> None:
    at = reading.at
    if text.startswith("[Assistant thinking]: "):
        reading.pieces.append(Piece(text.split(": ", 1)[1], "thinking", at))
    elif text.startswith("[Assistant tool call]: "):
        call = TOOL_CALL.match(text)
        shell = call is not None and call.group(1) in SHELLS and call.group(2)
        reading.pending = json.loads(call.group(2)) if call and shell else None
        reading.pieces.append(Piece(ARGUMENT_NAME.sub("", text.split(": ", 1)[1]), "tool_call", at))
    elif text.strip():
        reading.replies.append(Said(text, at))
        reading.pieces.append(Piece(text, "assistant", at))
