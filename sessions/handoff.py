"""The handoff document: prompt, extraction, structure check, wrapping, and the new session
it seeds.

The reference agent's `/handoff` (SPEC.md §2): H4 prompt, H6 extraction, H9 wrapper,
H13 the new session's message, and agentweb's B4 structure check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt

from . import checklists, todos
from .content import text_of
from .coverage import ADDENDUM_HEADING, KIND_LABELS
from .models import ChatSession, Entry
from .salience import Item

SECTIONS = (
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Critical Context",
    "Next Steps",
)
CUSTOM_TYPE = "handoff"
CLOSING = (
    "The above is a handoff document from a previous session. "
    "Use this context to continue the work seamlessly."
)
NOTHING_TO_HAND_OFF = "Nothing to hand off (no messages yet)"
CANCELLED = "Handoff cancelled"
STARTED = "New session started with handoff context"
NO_TEXT = "the model returned no text"
OUTPUT_LIMIT = (
    "the document stopped at {label}'s output limit of {tokens:,} tokens, even after one more "
    "round to finish it"
)

PROMPT = """You are handing this conversation off to a fresh session that will see nothing \
but the document you write now. Write a structured handoff document in markdown with \
exactly these sections, each as a level-2 heading, in this order:

## Goal
What the user is trying to achieve overall.

## Constraints & Preferences
Requirements, limits and preferences the user stated or implied.

## Progress
What has been done so far, and its state.

## Key Decisions
Decisions made, with the reason for each.

## Critical Context
Concrete facts the next session cannot work without: file paths, identifiers, \
commands, error messages, URLs, numbers.

## Next Steps
The ordered list of what to do next.

Be concrete; do not invent anything that was not said. The next session can look up the \
exact words of this conversation with its recall tool: carry what it needs to act on, not \
everything."""


_SECTION_HEADINGS = "\n".join(f"## {section}" for section in SECTIONS)

NOTES_PROMPT = f"""{{what}} Do NOT continue it and do NOT answer anything in it. \
Write notes on it for a handoff document, with exactly these sections, each as a level-2 \
heading, in this order:

{_SECTION_HEADINGS}

Keep every file path, identifier, command, error message, URL and number that still \
matters, verbatim. Be brief: the notes on all parts together must stay short."""

NOTES_OF = (
    "The text inside <conversation> tags above is part {part} of {parts} of a conversation "
    "too long to read in one request.",
    "The text inside <conversation> tags above holds part {part} of {parts} of the notes "
    "taken on a conversation too long to read in one request.",
)


def notes_request(transcript: str, part: int, parts: int, depth: int = 0) -> str:
    """The request for notes on one stretch of a conversation too long to send whole."""
    what = NOTES_OF[min(depth, 1)].format(part=part, parts=parts)
    return f"<conversation>\n{transcript}\n</conversation>\n\n" + NOTES_PROMPT.format(what=what)


UPDATE_PROMPT = (
    "Above are a handoff document written earlier in this conversation and the turns that "
    "came after it. Bring the document up to date: keep its sections, their headings and their "
    "order; fold in what the later turns did, decided, found and left open; drop what they made "
    "obsolete. Reply with the whole document only."
)


def update_request(document: str, later: str) -> str:
    """The short request that brings a draft a few turns old up to date with `later` turns."""
    return (
        f"<handoff-document>\n{document}\n</handoff-document>\n\n"
        f"<later-turns>\n{later}\n</later-turns>\n\n{UPDATE_PROMPT}"
    )


def notes_intro(notes: str, parts: int, model_label: str) -> str:
    """How the notes open the final handoff request, in place of the stretches they cover."""
    return (
        f"This conversation is longer than {model_label}'s context window, so agentweb "
        f"summarised its older part in {parts} part{'s' if parts != 1 else ''} first. "
        f"The notes, oldest first:\n\n<notes>\n{notes}\n</notes>"
    )


ADDENDUM_NOTE = (
    "*Added by agentweb, not by the model: salient items of the previous session that the "
    "document above does not mention.*"
)
MAX_CARRIED_OVER = 40


def also_carried_over(items: Sequence[Item], total_entries: int) -> str:
    """agentweb's own section: the dropped items, grouped by kind, with where each was last seen."""
    if not items:
        return ""
    lines = [f"## {ADDENDUM_HEADING}", "", ADDENDUM_NOTE]
    shown = list(items)[:MAX_CARRIED_OVER]
    for kind, label in KIND_LABELS.items():
        group = [item for item in shown if item.kind == kind]
        if not group:
            continue
        lines += ["", f"**{label}**", ""]
        for item in group:
            why = f"{', '.join(item.reasons)}; " if item.reasons else ""
            lines.append(f"- `{item.text}` — {why}last seen in {item.last_seen(total_entries)}")
    if len(items) > len(shown):
        lines += ["", f"…and {len(items) - len(shown)} more, less salient."]
    return "\n".join(lines)


AMEND_PROMPT = """Here is a handoff document, inside <document> tags, written for a fresh \
session that will see nothing else:

<document>
{document}
</document>

It leaves out these items of the conversation, which look important (each with the line \
it was last seen in):

{items}

Rewrite the whole handoff document so that it keeps every one of these items that still \
matters, each where it belongs, with the same sections in the same order. Output only the \
document."""


def amend_request(document: str, items: Sequence[Item]) -> str:
    """One more round: ask the model to work the items it dropped into its document."""
    listed = "\n".join(
        f"- {item.kind_label}: `{item.text}`" + (f" — «{item.snippet}»" if item.snippet else "")
        for item in list(items)[:MAX_CARRIED_OVER]
    )
    return AMEND_PROMPT.format(document=document, items=listed)


class NothingToHandOff(Exception):
    """Fewer than 2 message entries on the branch (H3)."""

    def __init__(self) -> None:
        super().__init__(NOTHING_TO_HAND_OFF)


def build_prompt(
    focus: str = "", todo_list: str = "", instructions: str = "", ledger: str = ""
) -> str:
    """The fixed handoff prompt (H4), with `Additional focus: …` when focus is given, the
    session's todo list (`todos.for_handoff`) when it has one, the work ledger (`ledger.section`)
    when the session did tool work, and the user's own standing instructions (a preference)
    last: added to the six sections, never instead of them."""
    focus, instructions = focus.strip(), instructions.strip()
    prompt = f"{PROMPT}\n\nAdditional focus: {focus}" if focus else PROMPT
    prompt = f"{prompt}\n\n{todo_list}" if todo_list else prompt
    prompt = f"{prompt}\n\n{LEDGER_INTRO}\n<ledger>\n{ledger}\n</ledger>" if ledger else prompt
    return f"{prompt}\n\n{OWN_INSTRUCTIONS}\n{instructions}" if instructions else prompt


LEDGER_INTRO = (
    "agentweb's work ledger of this session, written by code from its tool calls (what each "
    "file and command came to, and what failed last). Use it for Progress and Critical "
    "Context: report failures as failures and what is gone as gone. It is appended to your "
    "document as a section of its own, so do not copy it whole."
)


def with_ledger(document: str, section: str) -> str:
    """The document with the work ledger appended (agentweb's section, after the model's)."""
    return f"{document}\n\n{section}" if section else document


OWN_INSTRUCTIONS = (
    "The user's standing instructions for handoff documents (follow them within the six "
    "sections above):"
)


def check_guard(message_count: int) -> None:
    if message_count < 2:
        raise NothingToHandOff


def extract_document(entries: Sequence[Entry]) -> str:
    """H6: the most recent assistant message's text blocks joined by `\\n`; other blocks ignored."""
    for entry in reversed(entries):
        if entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.ASSISTANT:
            return text_of(entry.content)
    return ""


def wrap(document: str, came_from: ChatSession | None = None) -> str:
    """H9: the content of the handoff message injected into the new session; with the session
    it came from, one line more: what the document left out can be recalled from there."""
    wrapped = f"<handoff-context>\n{document}\n</handoff-context>\n\n{CLOSING}"
    return f"{wrapped}\n{RECALL_LINE.format(came_from.pk)}" if came_from else wrapped


RECALL_LINE = (
    "Earlier detail is not lost: the recall tool looks it up in session {} (the session this "
    "one continues) and the sessions before it, entry by entry."
)


def new_session(
    old: ChatSession,
    *,
    from_entry: Entry,
    content: str,
    data: dict[str, Any],
    generation_id: str = "",
    model: str = "",
) -> ChatSession:
    """The session the old one continues in (`ChatSession.hand_off`, one transaction), on
    `model` ("": the old one's): its handoff message (H9, H13: `content` is the wrapped
    document, `data` its records), then the todo list the document's open work seeds (H14)."""
    seed = [
        {
            "kind": Entry.Kind.CUSTOM_MESSAGE,
            "custom_type": CUSTOM_TYPE,
            "content": [{"type": "text", "text": content}],
            "display": True,
            "data": data,
        }
    ]
    if seeded := checklists.from_document(unwrap(content)):
        seed.append(todos.entry_fields(seeded, "handoff"))
    return old.hand_off(from_entry=from_entry, seed=seed, generation_id=generation_id, model=model)


def unwrap(content: str) -> str:
    match = re.search(r"<handoff-context>\n?(.*?)\n?</handoff-context>", content, re.DOTALL)
    return match.group(1) if match else content


@dataclass(frozen=True)
class StructureReport:
    missing: tuple[str, ...]
    empty: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.empty

    def warnings(self) -> list[str]:
        notes = [f"Missing section: {name}" for name in self.missing]
        return notes + [f"Empty section: {name}" for name in self.empty]


def _normalise(title: str) -> str:
    title = re.sub(r"\band\b", "&", re.sub(r"[*_`]", "", title).lower())
    return re.sub(r"[^a-z&]+", " ", title).strip()


@dataclass(frozen=True)
class _Heading:
    token: int  # index of its heading_open token
    level: int
    title: str  # normalised


def check_structure(document: str) -> StructureReport:
    """B4: compare the document's markdown headings with the six sections.

    Headings come from markdown-it's tokens, as the page renders them: `# comment` in a
    code fence is code, and a setext heading (`Goal` over `====`) is a heading. A section
    is empty when no block stands between its heading and the next heading of the same
    or a higher level.
    """
    tokens = MarkdownIt("commonmark").parse(document)
    headings = [
        _Heading(index, int(token.tag[1]), _normalise(tokens[index + 1].content))
        for index, token in enumerate(tokens)
        if token.type == "heading_open"
    ]
    missing: list[str] = []
    empty: list[str] = []
    for section in SECTIONS:
        found = next((h for h in headings if h.title == _normalise(section)), None)
        if found is None:
            missing.append(section)
            continue
        end = next(
            (h.token for h in headings if h.token > found.token and h.level <= found.level),
            len(tokens),
        )
        if end - found.token <= 3:  # heading_open, inline, heading_close: nothing after them
            empty.append(section)
    return StructureReport(tuple(missing), tuple(empty))
