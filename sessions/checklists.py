"""Todo lists written in text (issue 12): a handoff document's open work (its Progress and
Next Steps), and the checklist items and `todo:` lines of a message. A placeholder ("Nothing
recorded in this session.", "None") is no work."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .todos import MAX_ITEMS, MAX_TEXT, Todo

LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[(?P<box>[ xX~/-])\]\s+)?(?P<text>\S.*?)\s*$")
TODO_LINE = re.compile(r"^\s*(?:[-*+]\s+)?todo:\s*(?P<text>\S.*?)\s*$", re.IGNORECASE)
SUBHEADING = re.compile(r"^\s*(?:#{3,6}\s+(?P<h>.+?)|\*\*(?P<b>[^*]+?):?\*\*:?)\s*#*\s*$")
BOX_STATES = {" ": "pending", "x": "done", "X": "done", "~": "in_progress", "/": "in_progress",
              "-": "in_progress"}  # fmt: skip


PLACEHOLDER = re.compile(
    r"^(?:nothing(?: (?:recorded|yet|left|pending|to do|open))?(?: in this session)?|none"
    r"(?: yet)?|n/?a|no (?:next steps|open (?:work|items)|pending work)|[-—–]+)\W*$",
    re.IGNORECASE,
)


def _work(text: str) -> bool:
    """Whether a list item names work: a placeholder ("Nothing recorded in this session.",
    "None", "—") does not."""
    return PLACEHOLDER.match(text.strip()) is None


def from_document(document: str) -> list[Todo]:
    """A handoff document's open work: the unchecked items of Progress (and the items under
    its In Progress and Pending parts), then the Next Steps."""
    sections = _sections(document)
    todos: list[Todo] = []
    part = ""
    for line in sections.get("progress", []):
        if heading := SUBHEADING.match(line):
            part = _words(heading.group("h") or heading.group("b") or "")
            continue
        item = LIST_ITEM.match(line)
        if item is None:
            continue
        box = item.group("box")
        if box is not None:
            if BOX_STATES[box] != "done":
                state = "in_progress" if part == "in progress" else BOX_STATES[box]
                todos.append(Todo(_clean(item.group("text")), state))
        elif part in ("in progress", "pending"):
            todos.append(Todo(_clean(item.group("text")), part.replace(" ", "_")))
    for line in sections.get("next steps", []):
        item = LIST_ITEM.match(line)
        if item is not None and BOX_STATES.get(item.group("box") or " ") != "done":
            todos.append(Todo(_clean(item.group("text"))))
    return _distinct([todo for todo in todos if _work(todo.text)])


def from_text(text: str) -> list[Todo]:
    """The items a message writes out: `todo: …` lines and markdown checklist items."""
    todos: list[Todo] = []
    for line in text.splitlines():
        if todo := TODO_LINE.match(line):
            todos.append(Todo(_clean(todo.group("text"))))
        elif (item := LIST_ITEM.match(line)) and item.group("box") is not None:
            todos.append(Todo(_clean(item.group("text")), BOX_STATES[item.group("box")]))
    return todos


def merged(current: Sequence[Todo], mentioned: Sequence[Todo]) -> list[Todo]:
    """The list with the items a message mentions: a known item takes its new state, a new one
    is added at the end."""
    todos = list(current)
    for todo in mentioned:
        at = next((i for i, t in enumerate(todos) if t.text.lower() == todo.text.lower()), None)
        if at is None:
            todos.append(todo)
        else:
            todos[at] = Todo(todos[at].text, todo.state)
    return _distinct(todos)


def _sections(document: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in document.splitlines():
        if match := re.match(r"^\s{0,3}#{1,2}\s+(.+?)\s*#*\s*$", line):
            current = sections.setdefault(_words(match.group(1)), [])
        elif current is not None:
            current.append(line)
    return sections


def _words(title: str) -> str:
    title = re.sub(r"\band\b", "&", re.sub(r"[*_`]", "", title).lower())
    return re.sub(r"[^a-z&]+", " ", title).strip()


def _clean(text: str) -> str:
    text = " ".join(text.split())
    return text[: MAX_TEXT - 1] + "…" if len(text) > MAX_TEXT else text


def _distinct(todos: Sequence[Todo]) -> list[Todo]:
    seen: set[str] = set()
    kept: list[Todo] = []
    for todo in todos:
        key = todo.text.lower()
        if todo.text and key not in seen:
            seen.add(key)
            kept.append(todo)
    return kept[:MAX_ITEMS]
