"""The store: queries of a session's tree (its branch, outline, siblings, tree view, context).

Sync functions (call them through `database_sync_to_async` from async code). Branch walks
cost one query however long the session is. The writes are the session's own methods
(`ChatSession.append`, `move_leaf`, `fork`, `hand_off` …).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models.functions import Substr

from . import attachments
from .content import cut_at_word, plain_words, text_of
from .context import LLMMessage, build_context
from .models import ChatSession, Entry
from .statements import Statement
from .tree import Siblings, children, path_to, siblings_among


def get_branch(session: ChatSession) -> list[Entry]:
    """The entries from the root to the leaf, in order: one query for any size."""
    return branch_ending_at(leaf_of(session), Entry.objects.filter(session_id=session.pk))


def branch_ending_at(leaf_id: int | None, entries: Iterable[Entry]) -> list[Entry]:
    """Those of `entries` from the root to entry `leaf_id`, in order."""
    by_id = {entry.pk: entry for entry in entries}
    path = path_to(leaf_id, {pk: entry.parent_id for pk, entry in by_id.items()})
    return [by_id[pk] for pk in path]


@dataclass(slots=True)
class Row:
    """An entry of a branch read without its content: what the coverage report counts (its
    extracted items), at a fraction of a model instance's cost. Its `content` is None (its
    `text` empty) unless it has no items, which the report then extracts from it. Its tokens
    are not read (0): the report does not count them."""

    pk: int
    parent_id: int | None
    kind: str
    role: str
    status: str
    custom_type: str
    data: dict[str, Any]
    items: list[list[Any]] | None
    content: Any = None
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def text(self) -> str:
        return text_of(self.content)


ROW_FIELDS = ("id", "parent_id", "kind", "role", "status", "custom_type", "data", "items")


def branch_rows(session: ChatSession) -> list[Row]:
    """The branch from the root to the leaf as Rows (one query, and one more for the content of
    rows written before items were kept, which the report extracts them from)."""
    rows = {
        values[0]: Row(*values)
        for values in Entry.objects.filter(session_id=session.pk).values_list(*ROW_FIELDS)
    }
    path = path_to(leaf_of(session), {pk: row.parent_id for pk, row in rows.items()})
    branch = [rows[pk] for pk in path]
    _with_content(row for row in branch if row.items is None)
    return branch


def _with_content(rows: Iterable[Row]) -> None:
    """Read the content of these rows (one query)."""
    wanted = {row.pk: row for row in rows if row.content is None}
    for pk, content in Entry.objects.filter(pk__in=wanted).values_list("id", "content"):
        wanted[pk].content = content


def branch_ids(session: ChatSession) -> list[int]:
    """The ids of the entries from the root to the leaf (one small query for any size)."""
    return path_to(leaf_of(session), session.parents())


def leaf_of(session: ChatSession) -> int | None:
    return ChatSession.objects.values_list("leaf_id", flat=True).get(pk=session.pk)


def branch_back_to(session: ChatSession, stops: Collection[int], limit: int) -> set[int] | None:
    """The ids of the session's branch from its leaf back to the nearest of `stops` on it (that
    one included), or to its root: one query that walks up the parents from the leaf, so its
    cost is the distance walked, not the session's size. None when that is more than `limit`
    entries (the caller reads the whole branch instead)."""
    connection = connections[DEFAULT_DB_ALIAS]
    entries, sessions = f'"{Entry._meta.db_table}"', f'"{ChatSession._meta.db_table}"'  # quoted
    stopping = f"AND up.id NOT IN ({', '.join(['%s'] * len(stops))})" if stops else ""
    sql = (
        f"WITH RECURSIVE up(id, parent_id, walked) AS ("
        f"SELECT e.id, e.parent_id, 1 FROM {entries} e "
        f"WHERE e.id = (SELECT s.leaf_id FROM {sessions} s WHERE s.id = %s) "
        f"UNION ALL SELECT e.id, e.parent_id, up.walked + 1 FROM {entries} e "
        f"JOIN up ON e.id = up.parent_id WHERE up.walked <= %s {stopping}"
        f") SELECT id, parent_id FROM up"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [session.pk, limit, *stops])
        walked = cursor.fetchall()
    ids = {entry_id for entry_id, _ in walked}
    ended = not walked or any(parent is None for _, parent in walked) or not ids.isdisjoint(stops)
    return ids if ended else None


class Outline(list[tuple[int, str]]):
    """(id, role) of each entry from the root to the leaf, and the siblings of those that
    have some: the branch without its content, so a page can choose which entries to load."""

    def __init__(self, rows: Iterable[tuple[int, str]], siblings: dict[int, Siblings]) -> None:
        super().__init__(rows)
        self.siblings = siblings


def branch_outline(session: ChatSession) -> Outline:
    """The session's branch as an Outline: one small query for any size."""
    rows = Entry.objects.filter(session_id=session.pk).values_list("id", "parent_id", "role")
    parents: dict[int, int | None] = {}
    roles: dict[int, str] = {}
    for entry_id, parent_id, role in rows:
        parents[entry_id], roles[entry_id] = parent_id, role
    path = path_to(leaf_of(session), parents)
    children_of = children(parents)
    found = {
        pk: sibling
        for pk in path
        if (sibling := siblings_among(pk, children_of.get(parents[pk], []))) is not None
    }
    return Outline([(pk, roles[pk]) for pk in path], found)


def siblings(entry: Entry) -> Siblings | None:
    """Where this entry stands among its parent's children (one query)."""
    family = Entry.objects.filter(session_id=entry.session_id, parent_id=entry.parent_id)
    return siblings_among(entry.pk, sorted(family.values_list("id", flat=True)))


@dataclass(frozen=True)
class TreeRow:
    """One line of the tree view."""

    id: int
    depth: int  # how many forks lie above it
    read: tuple[str, str, str, str, object, object]  # kind, role, custom, text, purpose, setting
    on_branch: bool  # on the session's current branch
    is_leaf: bool
    forks: int  # how many branches start under it (0 or 1: none)

    @property
    def label(self) -> str:
        """Who speaks, or what kind of entry it is."""
        kind, role, custom, _, purpose, setting = self.read
        return tree_label(kind, role, custom, purpose, setting)

    @property
    def text(self) -> str:
        """The start of its words, without markdown marks or the handoff wrapper (worked out
        for the rows a page shows only: a tree of 99,000 entries shows 500)."""
        text = self.read[3]
        shown, wrapper_end, _ = text.partition("</handoff-context>")  # not its closing line
        words = plain_words(shown.replace("<handoff-context>", ""))
        if len(text) == TREE_READ and not wrapper_end and " " in words:  # a cut word
            words = words.rsplit(" ", 1)[0] + "…"
        return cut_at_word(words, TREE_TEXT)

    @property
    def indent(self) -> int:
        """How far the page indents it: its depth, up to MAX_INDENT."""
        return min(self.depth, MAX_INDENT)


MAX_INDENT = 20  # the deepest indent the tree page draws (app.css has a rule for each)


TREE_TEXT = 100  # characters of each entry the tree view shows (cut at a word)
TREE_READ = TREE_TEXT + 40  # read of each entry: its marks and wrapper come off first


def tree(session: ChatSession) -> list[TreeRow]:
    """The whole session tree, depth first, oldest branch first; a new depth only where the
    tree forks, so a long linear session stays flat (one query, no content loaded)."""
    rows = Entry.objects.filter(session_id=session.pk).values_list(
        "id",
        "parent_id",
        "kind",
        "role",
        "custom_type",
        Substr("search_text", 1, TREE_READ),
        "data__purpose",
        "data__fields__thinkingLevel",
        "data__fields__modelId",
    )
    parents: dict[int, int | None] = {}
    about: dict[int, tuple[str, str, str, str, object, object]] = {}
    for entry_id, parent_id, kind, role, custom, text, purpose, level, model in rows:
        parents[entry_id] = parent_id
        about[entry_id] = (kind, role, custom, text, purpose, level or model)
    children_of = children(parents)
    leaf = leaf_of(session)
    branch = set(path_to(leaf, parents))
    lines: list[TreeRow] = []
    stack = [(root, 0) for root in reversed(children_of.get(None, []))]
    if len(stack) > 1:
        stack = [(root, 1) for root, _ in stack]
    while stack:
        entry_id, depth = stack.pop()
        under = children_of.get(entry_id, [])
        lines.append(
            TreeRow(
                entry_id, depth, about[entry_id], entry_id in branch, entry_id == leaf, len(under)
            )
        )
        deeper = depth + 1 if len(under) > 1 else depth
        stack.extend((child, deeper) for child in reversed(under))
    return lines


MESSAGE_LABELS = {
    ("user", ""): "You",
    ("user", "handoff"): "Handoff request (agentweb)",
    ("assistant", ""): "Assistant",
    ("assistant", "handoff"): "Handoff document (draft)",
    ("assistant", "handoff_notes"): "Handoff notes",
    ("toolResult", ""): "Tool result",
}
CUSTOM_LABELS = {
    "handoff": "Handoff document",
    "handoff_notes": "Handoff notes",
    "todos": "Todo list",
    "todo_note": "Note",
    "todo_reminder": "Reminder",
    "tool_limit": "Tool limit",
    "interrupted": "Interrupted",
    "handoff_failed": "Handoff failed",
}
KIND_LABELS = {
    "model_change": "Model",
    "thinking_level_change": "Thinking level",
    "compaction": "Compaction summary",
    "branch_summary": "Branch summary",
    "label": "Label",
}


def tree_label(kind: str, role: str, custom: str, purpose: object, setting: object) -> str:
    """What the tree calls an entry, in words a person uses: who speaks, or what it is ("Note",
    "Tool result", "Thinking level: high", "Handoff document")."""
    if kind == Entry.Kind.MESSAGE:
        why = purpose if isinstance(purpose, str) else ""
        return MESSAGE_LABELS.get((role, why)) or MESSAGE_LABELS.get((role, ""), "Message")
    if kind in (Entry.Kind.CUSTOM, Entry.Kind.CUSTOM_MESSAGE):
        return CUSTOM_LABELS.get(custom, "Note")
    label = KIND_LABELS.get(kind, "Entry")
    return f"{label}: {setting}" if isinstance(setting, str) and setting else label


def session_context(session: ChatSession, upto: int | None = None) -> list[LLMMessage]:
    """The context of the session's branch, or of the branch ending at entry `upto` (the
    files attached on it read from the storage)."""
    files = attachments.reader(session.owner_id)
    if upto is None:
        return build_context(get_branch(session), files)
    entries = branch_ending_at(upto, Entry.objects.filter(session_id=session.pk))
    return build_context(entries, files)


def count_messages(entries: Sequence[Entry]) -> int:
    """How many `message` entries a branch holds (the handoff guard counts these)."""
    return sum(1 for entry in entries if entry.kind == Entry.Kind.MESSAGE)


def kept_generation(session_id: int) -> str | None:
    """The channel of the session's generation ("" when none runs), or None when the session
    is not kept (deleted): every frame of every socket asks, and a Cancel needs no more."""
    found = KEPT.first(session_id=session_id)
    return None if found is None else found[0]


KEPT: Statement[ChatSession] = Statement(
    lambda session_id: ChatSession.objects.filter(ChatSession.kept(), pk=session_id).values_list(
        "generation_channel"
    )[:1],
    session_id=int,
)


def owned_session(owner: User, session_id: int) -> ChatSession | None:
    return ChatSession.objects.filter(ChatSession.kept(), pk=session_id, owner=owner).first()
