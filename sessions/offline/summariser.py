"""How the offline model writes a document with named sections (a handoff, or notes).

It is extractive and deterministic: it reads its context as a model would, telling
apart from their labels what the user said, what tools returned and what earlier
summaries kept; ranks the concrete items with the coverage panel's salience; and fills
each requested section from the summaries it was given and the conversation itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import todos
from ..content import block_texts
from ..context import BRANCH_SUMMARY_PREFIX, COMPACTION_PREFIX
from ..coverage import SALIENT, rank_pieces
from ..items import KIND_LABELS, Piece, normalise

SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
FOCUS = re.compile(r"^Additional focus:\s*(.+)$", re.MULTILINE)
SECTION = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.MULTILINE)
TOOL_RESULT = re.compile(r"^\[Tool result: [^\]\n]*?(, error)?\]: ", re.DOTALL)
ARGUMENT_NAME = re.compile(r"\b\w+=")
CONSTRAINT_WORDS = ("must", "should", "don't", "do not", "never", "always", "prefer", "avoid",
                    "only", "keep ", "不要", "必须")  # fmt: skip
SECTION_KEYS = ("goal", "constraint", "progress", "decision", "context", "next")
LISTED_FROM = SALIENT - 1.0  # items listed in Critical Context: the salient, and the next ones
MAX_LISTED = 80
MIN_LISTED = 20


@dataclass
class Reading:
    """A conversation as the offline model understands it."""

    pieces: list[Piece] = field(default_factory=list)  # every text, labelled by source
    requests: list[str] = field(default_factory=list)  # what the user typed
    replies: list[str] = field(default_factory=list)  # what the assistant said
    summaries: list[str] = field(default_factory=list)  # compactions, notes, earlier handoffs


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
    at = len(reading.pieces)
    if match := TOOL_RESULT.match(text):
        reading.pieces.append(Piece(text[match.end() :], "tool_result", at, bool(match.group(1))))
    elif text.startswith("Ran `"):
        command, _, output = text[5:].partition("`")
        failed = "Command exited with code" in output
        reading.pieces += [
            Piece(command, "bash_command", at),
            Piece(output, "tool_result", at, failed),
        ]
    elif summary := _summary_in(text):
        reading.summaries.append(summary)
        reading.pieces.append(Piece(summary, "summary", at))
    else:
        reading.requests.append(text)
        reading.pieces.append(Piece(text, "user", at))


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
    at = len(reading.pieces)
    if text.startswith("[Assistant thinking]: "):
        reading.pieces.append(Piece(text.split(": ", 1)[1], "thinking", at))
    elif text.startswith("[Assistant tool call]: "):
        call = ARGUMENT_NAME.sub("", text.split(": ", 1)[1])
        reading.pieces.append(Piece(call, "tool_call", at))
    elif text.strip():
        reading.replies.append(text)
        reading.pieces.append(Piece(text, "assistant", at))


# --- writing ---------------------------------------------------------------------------------
def write_document(sections: list[str], reading: Reading, request: str, cwd: str = "") -> str:
    """One `## <section>` per requested section, filled from what was read."""
    items = rank_pieces(reading.pieces, cwd)
    kept = _kept_sections(reading.summaries)
    focus = FOCUS.search(request)
    requests = [text for text in reading.requests if text.strip()]
    writers: dict[str, Callable[[], list[str]]] = {
        "goal": lambda: _unique(
            kept["goal"][:4] + ([_first_sentence(requests[0])] if requests else [])
        ),
        "constraint": lambda: _unique(
            kept["constraint"] + _matching(_sentences_of(requests), CONSTRAINT_WORDS)
        )[:16],
        "progress": lambda: _unique(
            kept["progress"][:24]
            + todos.in_handoff_request(request)
            + [f"Asked: {_first_sentence(text)}" for text in requests[-6:]]
            + ([f"Last reply: {_first_sentence(reading.replies[-1])}"] if reading.replies else [])
        ),
        "decision": lambda: _unique(kept["decision"] + _decisions(items))[:16],
        "context": lambda: kept["context"][:12] + _listed(items),
        "next": lambda: _unique(
            ([f"Focus: {focus.group(1).strip()}"] if focus else [])
            + kept["next"][:8]
            + [f"Pick up from the last request: {_first_sentence(text)}" for text in requests[-1:]]
        ),
    }  # fmt: skip
    parts: list[str] = []
    for name in sections:
        key = next((k for k in SECTION_KEYS if k in name.lower()), None)
        lines = [line for line in (writers[key]() if key else []) if line.strip()]
        if not lines:
            lines = ["Nothing recorded in this session."]
        parts.append(f"## {name}\n\n" + "\n".join(_bullet(line) for line in lines))
    return "\n\n".join(parts)


def _decisions(items: list[Any]) -> list[str]:
    return [item.text for item in items if item.kind == "decision" and item.salience >= LISTED_FROM]


def _listed(items: list[Any]) -> list[str]:
    """The concrete items worth carrying, most salient first, grouped by kind."""
    candidates = [item for item in items if item.kind != "decision"]
    chosen = [item for item in candidates if item.salience >= LISTED_FROM][:MAX_LISTED]
    if len(chosen) < MIN_LISTED:  # a short conversation: room for everything it named
        chosen = candidates[:MIN_LISTED]
    lines: list[str] = []
    for kind, label in KIND_LABELS.items():
        group = [item.text for item in chosen if item.kind == kind]
        if group:
            lines.append(f"{label}: " + ", ".join(f"`{text}`" for text in group))
    return lines


def _kept_sections(summaries: list[str]) -> dict[str, list[str]]:
    """The lines of each section of the summaries read (compactions, notes, handoffs), newest
    first, so the latest state of the work leads."""
    kept: dict[str, list[str]] = {key: [] for key in SECTION_KEYS}
    for summary in reversed(summaries):
        matches = list(SECTION.finditer(summary))
        for index, match in enumerate(matches):
            key = next((k for k in SECTION_KEYS if k in match.group(1).lower()), None)
            end = matches[index + 1].start() if index + 1 < len(matches) else len(summary)
            if key is None:
                continue
            body = summary[match.end() : end]
            kept[key] += [line.strip() for line in body.splitlines() if _is_content(line)]
    return {key: _unique(lines) for key, lines in kept.items()}


def _is_content(line: str) -> bool:
    text = line.strip().lstrip("-*0123456789.[]x ").strip()
    return bool(text) and not text.startswith("###") and text != "Nothing recorded in this session."


def _bullet(line: str) -> str:
    line = line.strip()
    if line.startswith(("- ", "* ", "### ")) or re.match(r"^\d+\. ", line):
        return line
    return f"- {line}"


def _sentences_of(texts: list[str]) -> list[str]:
    return [sentence for text in texts for sentence in _sentences(text)]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if len(s.strip()) > 3]


def _first_sentence(text: str) -> str:
    sentences = _sentences(text.replace("*", ""))
    return (sentences[0] if sentences else text.strip())[:300]


def _matching(sentences: list[str], words: tuple[str, ...]) -> list[str]:
    return [s[:300] for s in sentences if any(w in s.lower() for w in words)]


def _unique(lines: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = normalise(line.lstrip("-*0123456789.[]x "))
        if line.strip() and key not in seen:
            seen.add(key)
            out.append(line)
    return out
