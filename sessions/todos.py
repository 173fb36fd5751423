"""The session's todo list: the list the agent keeps through its `todo_write` tool, which the
user may edit too, which a reminder keeps alive, and which a handoff carries over.

The list is part of the session's history, so it follows the branch and travels in the export:

* the model's update is a `toolCall` block (`todo_write`, the full new list) in its reply, then
  a `toolResult` message whose `details` hold the list it set (an error result sets nothing);
* the user's edit, and the list seeded from a handoff document, are `custom` entries
  (`customType` "todos"), which the model does not read; the user's change reaches the model
  as a note (a `custom_message`, "todo_note") before its next turn;
* the reminder is a `custom_message` ("todo_reminder") before a turn, once items have stayed
  open for AGENTWEB_TODO_REMINDER_TURNS replies without an update."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import BooleanField, Q, QuerySet, Value

from .models import ChatSession, Entry
from .shapes import part
from .statements import Statement
from .store import branch_back_to, branch_ids
from .tallies import Tally, with_the_newest

TOOL_NAME = "todo_write"
CUSTOM_TYPE = "todos"  # a list set by the user or seeded from a handoff document
NOTE_TYPE = "todo_note"  # the model is told of the user's change
REMINDER_TYPE = "todo_reminder"

STATES = ("pending", "in_progress", "done")
STATE_LABELS = {"pending": "pending", "in_progress": "in progress", "done": "done"}
BUSY = (
    "Wait for the reply to end (or cancel it) to edit the todo list: the model may be changing it."
)
MAX_ITEMS = 100
MAX_TEXT = 500


@dataclass(frozen=True)
class Todo:
    text: str
    state: str = "pending"

    @property
    def is_open(self) -> bool:
        return self.state != "done"

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "state": self.state}


class TodoInputError(ValueError):
    """A `todo_write` input the list cannot take; the message goes back to the model."""


# --- the tool's input --------------------------------------------------------------------
def parse_input(arguments: Any) -> list[Todo]:
    """The list a `todo_write` call sets, or TodoInputError saying what is wrong with it."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("todos"), list):
        raise TodoInputError('the input must be {"todos": [{"text": …, "state": …}, …]}')
    items = arguments["todos"]
    if len(items) > MAX_ITEMS:
        raise TodoInputError(f"at most {MAX_ITEMS} items, not {len(items)}")
    todos: list[Todo] = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise TodoInputError(f"item {number} must be an object with `text` and `state`")
        text, state = item.get("text"), item.get("state")
        if not isinstance(text, str) or not text.strip():
            raise TodoInputError(f"item {number}: `text` must be non-empty text")
        if len(text) > MAX_TEXT:
            raise TodoInputError(f"item {number}: `text` is longer than {MAX_TEXT} characters")
        if state not in STATES:
            raise TodoInputError(
                f"item {number}: `state` must be one of {', '.join(STATES)}, not {state!r}"
            )
        todos.append(Todo(" ".join(text.split()), state))
    return todos


def as_dicts(todos: Sequence[Todo]) -> list[dict[str, str]]:
    return [todo.as_dict() for todo in todos]


def from_dicts(items: Any) -> list[Todo]:
    """A stored list (trusted, but read defensively: an imported file may hold anything)."""
    try:
        return parse_input({"todos": items})
    except TodoInputError:
        return []


def summary(todos: Sequence[Todo]) -> str:
    """`3 items: 1 done, 1 in progress, 1 pending`."""
    if not todos:
        return "The todo list is empty."
    counts = [
        f"{sum(1 for t in todos if t.state == state)} {STATE_LABELS[state]}"
        for state in ("done", "in_progress", "pending")
        if any(t.state == state for t in todos)
    ]
    return f"{len(todos)} item{'s' if len(todos) != 1 else ''}: {', '.join(counts)}"


def checklist(todos: Sequence[Todo]) -> str:
    """The list as a markdown checklist (in progress marked `[~]`)."""
    marks = {"pending": " ", "in_progress": "~", "done": "x"}
    return "\n".join(f"- [{marks[todo.state]}] {todo.text}" for todo in todos)


def result_text(todos: Sequence[Todo]) -> str:
    """What the model is told when its list was set."""
    return f"Todo list updated. {summary(todos)}."


def note_text(todos: Sequence[Todo]) -> str:
    """What the model is told of the user's change to the list."""
    if not todos:
        return "The user cleared the todo list."
    return f"The user edited the todo list. It is now:\n{checklist(todos)}"


def is_note(text: str) -> bool:
    """Whether a user-side text is agentweb's own word on the list (the user's edit, a
    reminder), not something the user typed."""
    return text.startswith(("The user edited the todo list.", "The user cleared the todo list."))


def is_reminder(text: str) -> bool:
    return text.startswith("Reminder: ") and f"update the list with {TOOL_NAME}" in text


def reminder_text(todos: Sequence[Todo], turns: int) -> str:
    open_items = [todo for todo in todos if todo.is_open]
    return (
        f"Reminder: {len(open_items)} item{'s' if len(open_items) != 1 else ''} of the todo "
        f"list stayed open for {turns} replies without an update. If your work moved them on, "
        f"update the list with {TOOL_NAME}; if they no longer apply, remove them.\n"
        f"{checklist(open_items)}"
    )


# --- the list on a branch ----------------------------------------------------------------
@dataclass(frozen=True)
class TodoState:
    todos: list[Todo]
    turns_since_update: int = 0  # complete replies since the list changed (or a reminder)
    unseen_user_change: bool = False  # the latest change is the user's, untold to the model

    @property
    def open_count(self) -> int:
        return sum(1 for todo in self.todos if todo.is_open)


_CHANGES = (
    Q(role=Entry.Role.TOOL_RESULT, data__message__toolName=TOOL_NAME)
    | Q(kind=Entry.Kind.CUSTOM, custom_type=CUSTOM_TYPE)
    | Q(kind=Entry.Kind.CUSTOM_MESSAGE, custom_type__in=[NOTE_TYPE, REMINDER_TYPE])
)


def state(session: ChatSession, branch: Iterable[int] | None = None) -> TodoState:
    """The list on the session's branch (its ids when the caller has them), in a few small
    queries: the list's changes (tallied), the branch back to the latest, the replies since."""
    changes = list(CHANGED.of(session))
    if not any(_sets_the_list(entry) for entry in changes):  # most sessions: one query
        return TodoState([])  # notes alone leave no list: nothing open, nothing unseen
    path = set(branch) if branch is not None else _back_to_the_list(session, changes)
    changes = [entry for entry in changes if entry.pk in path]
    todos: list[Todo] = []
    unseen = False
    reset: Entry | None = None  # the latest change or reminder: replies are counted after it
    for entry in changes:
        if entry.kind == Entry.Kind.CUSTOM_MESSAGE:
            unseen, reset = unseen and entry.custom_type != NOTE_TYPE, entry
        elif _sets_the_list(entry):
            (todos, unseen), reset = _list_set_by(entry), entry
    turns = 0
    if reset is not None and any(todo.is_open for todo in todos):
        replies = Entry.objects.filter(
            session_id=session.pk,
            pk__gt=reset.pk,
            kind=Entry.Kind.MESSAGE,
            role=Entry.Role.ASSISTANT,
            status=Entry.Status.COMPLETE,
            data__purpose__isnull=True,
        ).values_list("pk", flat=True)
        turns = sum(1 for pk in replies if pk in path)
    return TodoState(todos, turns, unseen)


def _changing(session_id: int, after: int) -> QuerySet[Entry, Any]:
    """The entries after `after` that change the list (id, True), and the newest (id, False)."""
    new = Entry.objects.filter(session_id=session_id, pk__gt=after)
    changing = new.filter(_CHANGES).annotate(changes=Value(True)).values_list("pk", "changes")
    return with_the_newest(new, changing, Value(False))


CHANGES: Statement[Entry] = Statement(
    _changing, columns={"changes": BooleanField()}, session_id=int, after=int
)
WALK = 200  # entries walked up from the leaf for the list; further, the whole branch is read


def _back_to_the_list(session: ChatSession, changes: Sequence[Entry]) -> set[int]:
    """The branch from its leaf back to the latest entry on it that set the (whole) list, or all
    of it when that is more than WALK entries back: what came before says nothing more."""
    setting = [entry.pk for entry in changes if _sets_the_list(entry)]
    walked = branch_back_to(session, setting, WALK)
    return walked if walked is not None else set(branch_ids(session))


def _sets_the_list(entry: Entry) -> bool:
    """The user's list, or the model's todo_write that did not fail (not a note)."""
    if entry.kind == Entry.Kind.CUSTOM:
        return True
    failed = part(entry.data, "message").get("isError") is True
    return entry.kind != Entry.Kind.CUSTOM_MESSAGE and not failed


def _list_set_by(entry: Entry) -> tuple[list[Todo], bool]:
    """The list an entry set, and whether the model has yet to be told of it (the user's)."""
    if entry.kind == Entry.Kind.CUSTOM:
        data = part(entry.data, "fields", "data")
        return from_dicts(data.get("todos")), data.get("source") == "user"
    return from_dicts(part(entry.data, "message", "details").get("todos")), False


def _changes_in(rows: list[tuple[Any, ...]]) -> list[tuple[int, Entry | None]]:
    """CHANGES' rows, as the entries that changed the list, in order, and the newest's id."""
    if not rows:
        return []  # nothing written since
    changed = Entry.objects.in_bulk([pk for pk, changes in rows if changes])
    return [(pk, changed[pk]) for pk in sorted(changed)] + [(max(pk for pk, _ in rows), None)]


# The entries that changed the list, kept and read on from the newest (`sessions.tallies`): a
# scan of every entry for them was 5 ms at 10,000 entries on SQLite, 8 on PostgreSQL, a prompt.
CHANGED: Tally[tuple[int, Entry | None], tuple[Entry, ...]] = Tally(
    CHANGES,
    last=lambda row: row[0],
    fold=lambda before, rows: (*before, *(entry for _, entry in rows if entry is not None)),
    empty=(),
    taken=_changes_in,
)


def notes_due(session: ChatSession) -> list[Entry]:
    """The notes on the list the model needs before its turn, stored (so they follow the branch
    and are exported): the user's change to the list, or a reminder of open items."""
    todo_state = state(session)
    if todo_state.unseen_user_change:
        note = note_text(todo_state.todos)
        return [session.append_custom_message(NOTE_TYPE, note, display=True)]
    if reminder_due(todo_state):
        text = reminder_text(todo_state.todos, todo_state.turns_since_update)
        return [session.append_custom_message(REMINDER_TYPE, text, display=True)]
    return []


def reminder_due(todo_state: TodoState) -> bool:
    every = settings.AGENTWEB_TODO_REMINDER_TURNS
    return bool(every) and todo_state.open_count > 0 and todo_state.turns_since_update >= every


def entry_fields(todo_list: Sequence[Todo], source: str) -> dict[str, Any]:
    """The `custom` entry that holds the list as `source` set it (the user, or a handoff
    document it was seeded from), as exported. The model does not read it: the user's change
    reaches it as a note before its next turn."""
    data = {"todos": as_dicts(todo_list), "source": source}
    return {
        "kind": Entry.Kind.CUSTOM,
        "custom_type": CUSTOM_TYPE,
        "content": [{"type": "text", "text": checklist(todo_list) or "(empty)"}],
        "data": {"fields": {"customType": CUSTOM_TYPE, "data": data}},
    }


def append_list(session: ChatSession, todo_list: Sequence[Todo], source: str) -> Entry:
    """The list as the user set it (`source` "user") or a handoff seeded it, in the history."""
    return session.append(**entry_fields(todo_list, source))


# --- the list in a handoff request ---------------------------------------------------------
HANDOFF_INTRO = "The session's todo list, as it stands:"
HANDOFF_ASK = (
    "Carry it over: in Progress, list its open items as unchecked checklist items "
    "(`- [ ] …`, `- [~] …` for one in progress) and its finished ones as checked (`- [x] …`)."
)


def for_handoff(todo_list: Sequence[Todo]) -> str:
    """What the handoff request says of the list, so that the document carries it over (the new
    session's list is read back from the document)."""
    if not todo_list:
        return ""
    return f"{HANDOFF_INTRO}\n{checklist(todo_list)}\n{HANDOFF_ASK}"


def in_handoff_request(request: str) -> list[str]:
    """The checklist lines a handoff request gave (see `for_handoff`)."""
    _, found, rest = request.partition(HANDOFF_INTRO + "\n")
    if not found:
        return []
    return [line for line in rest.splitlines() if line.startswith("- [")][:MAX_ITEMS]
