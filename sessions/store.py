"""The session manager: the reference agent's session-manager, on the ORM.

Sync functions (call them through `database_sync_to_async` from async code).
Branch walks cost one query however long the session is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Substr
from django.utils import timezone

from . import coverage, thinking, todos
from .context import LLMMessage, build_context, context_tokens, entry_parts
from .models import ChatSession, Entry, PendingPrompt, PromptTemplate, text_of
from .search import searchable

TITLE_LENGTH = 80
# What a first line may start with that is markdown, not words: heading marks, a quote, a list
# item's bullet or number, a checkbox.
MARKDOWN_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+(?:\[[ xX~/-]\]\s+)?|\d+[.)]\s+)+")
TEMPLATE_CALL = re.compile(r"^/(?P<name>[a-z][a-z0-9_-]*)(?:\s+(?P<args>.*))?$", re.DOTALL)
__all__ = ["LLMMessage", "build_context"]  # the session manager's names, built in context.py


def new_session(
    owner: User,
    *,
    model: str,
    title: str = "",
    parent_session: ChatSession | None = None,
    handed_off_from: Entry | None = None,
) -> ChatSession:
    return ChatSession.objects.create(
        owner=owner,
        model=model,
        title=title,
        parent_session=parent_session,
        handed_off_from=handed_off_from,
        chain_root_id=parent_session.chain_id if parent_session else None,
        part=parent_session.part + 1 if parent_session else 1,
    )


def get_branch(session: ChatSession) -> list[Entry]:
    """The entries from the root to the leaf, in order: one query for any size."""
    return branch_ending_at(leaf_of(session), Entry.objects.filter(session_id=session.pk))


def branch_ending_at(leaf_id: int | None, entries: Iterable[Entry]) -> list[Entry]:
    """Those of `entries` from the root to entry `leaf_id`, in order."""
    by_id = {entry.pk: entry for entry in entries}
    path = _path_to(leaf_id, {pk: entry.parent_id for pk, entry in by_id.items()})
    return [by_id[pk] for pk in path]


def branch_ids(session: ChatSession) -> list[int]:
    """The ids of the entries from the root to the leaf (one small query for any size)."""
    return _path_to(leaf_of(session), _session_parents(session.pk))


def leaf_of(session: ChatSession) -> int | None:
    return ChatSession.objects.values_list("leaf_id", flat=True).get(pk=session.pk)


@dataclass(frozen=True)
class Siblings:
    """Where an entry stands among the entries that share its parent (the branches there)."""

    position: int  # from 1, oldest first
    count: int
    previous: int | None  # the sibling before it, if any
    next: int | None  # the sibling after it, if any


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
    path = _path_to(leaf_of(session), parents)
    children = _children(parents)
    siblings = {
        pk: found
        for pk in path
        if (found := _siblings_among(pk, children.get(parents[pk], []))) is not None
    }
    return Outline([(pk, roles[pk]) for pk in path], siblings)


def _children(parents: Mapping[int, int | None]) -> dict[int | None, list[int]]:
    """Each entry's children (the roots under None), oldest first."""
    children: dict[int | None, list[int]] = {}
    for entry_id in sorted(parents):
        children.setdefault(parents[entry_id], []).append(entry_id)
    return children


def _siblings_among(entry_id: int, family: list[int]) -> Siblings | None:
    if len(family) < 2:
        return None
    at = family.index(entry_id)
    return Siblings(
        at + 1,
        len(family),
        family[at - 1] if at > 0 else None,
        family[at + 1] if at + 1 < len(family) else None,
    )


def siblings(entry: Entry) -> Siblings | None:
    """Where this entry stands among its parent's children (one query)."""
    family = Entry.objects.filter(session_id=entry.session_id, parent_id=entry.parent_id)
    return _siblings_among(entry.pk, sorted(family.values_list("id", flat=True)))


def _session_parents(session_id: int) -> dict[int, int | None]:
    rows = Entry.objects.filter(session_id=session_id).values_list("id", "parent_id")
    return dict(rows)


def _tip(entry_id: int, children: Mapping[int | None, list[int]]) -> int:
    """The newest entry of the subtree under `entry_id`: the end of the branch last written
    there, which a switch to that branch shows."""
    newest, stack = entry_id, [entry_id]
    while stack:
        current = stack.pop()
        newest = max(newest, current)
        stack.extend(children.get(current, []))
    return newest


class BranchRefused(Exception):
    """A branch operation that cannot be done now, with the reason a person reads."""


BUSY_BRANCHING = "Wait for the reply to end (or cancel it) before changing branches."
NOT_AN_ENTRY = "That entry is not part of this session."


def switch_branch(session: ChatSession, entry_id: int) -> int:
    """Make the branch through entry `entry_id` the session's own: the leaf moves to the newest
    entry under it. Returns the new leaf. Refused (BranchRefused) while a generation runs."""
    with transaction.atomic():
        parents = _session_parents(session.pk)
        if entry_id not in parents:
            raise BranchRefused(NOT_AN_ENTRY)
        tip = _tip(entry_id, _children(parents))
        move_leaf(session, tip)
    return tip


def move_leaf(session: ChatSession, leaf_id: int | None, *, generation_id: str = "") -> None:
    """Point the session at another branch (None: before its first entry), with the context
    size of that branch; refused (BranchRefused) while a generation runs, unless it is the
    caller's own (`generation_id`: an edit or a regeneration about to reply)."""
    mine = Q(generation_id=generation_id) if generation_id else Q(pk__in=[])
    with transaction.atomic():
        path = _path_to(leaf_id, _session_parents(session.pk)) if leaf_id is not None else []
        branch = entries_by_id(path)
        size, level = context_tokens(branch), thinking.level_on(branch)
        moved = ChatSession.objects.filter(ChatSession.claimable() | mine, pk=session.pk).update(
            leaf_id=leaf_id, context_tokens=size, thinking_level=level, updated_at=timezone.now()
        )
        if not moved:
            raise BranchRefused(BUSY_BRANCHING)
    session.leaf_id, session.context_tokens, session.thinking_level = leaf_id, size, level


def fork(session: ChatSession, entry_id: int) -> ChatSession:
    """A new session holding the branch from the root to entry `entry_id` (the reference
    agent's /branch): copies of those entries, its lineage kept in `forked_from`."""
    with transaction.atomic():
        parents = _session_parents(session.pk)
        if entry_id not in parents:
            raise BranchRefused(NOT_AN_ENTRY)
        originals = entries_by_id(_path_to(entry_id, parents))
        new = ChatSession.objects.create(
            owner_id=session.owner_id,
            model=session.model,
            title=session.title,
            forked_from_id=entry_id,
            imported_model=session.imported_model,
            cwd=session.cwd,
            context_tokens=context_tokens(originals),
            thinking_level=thinking.level_on(originals),
        )
        copies = Entry.objects.bulk_create(
            [_copy(original, new) for original in originals], batch_size=500
        )
        new_id = {original.pk: copy.pk for original, copy in zip(originals, copies, strict=True)}
        for original, copy in zip(originals, copies, strict=True):
            copy.parent_id = new_id.get(original.parent_id) if original.parent_id else None
            refs = copy.data.get("refs")
            if isinstance(refs, dict):
                copy.data["refs"] = {k: new_id[v] for k, v in refs.items() if v in new_id}
        Entry.objects.bulk_update(copies, ["parent", "data"], batch_size=500)
        ChatSession.objects.filter(pk=new.pk).update(leaf_id=copies[-1].pk if copies else None)
    new.refresh_from_db()
    return new


def _copy(entry: Entry, session: ChatSession) -> Entry:
    fields = {
        field.attname: getattr(entry, field.attname)
        for field in Entry._meta.concrete_fields
        if field.attname not in ("id", "session_id", "parent_id")
    }
    return Entry(session_id=session.pk, **fields)


@dataclass(frozen=True)
class TreeRow:
    """One line of the tree view."""

    id: int
    depth: int  # how many forks lie above it
    label: str  # who speaks, or what kind of entry it is
    text: str  # the start of its text
    on_branch: bool  # on the session's current branch
    is_leaf: bool
    forks: int  # how many branches start under it (0 or 1: none)


TREE_TEXT = 100  # characters of each entry the tree view shows


def tree(session: ChatSession) -> list[TreeRow]:
    """The whole session tree, depth first, oldest branch first; a new depth only where the
    tree forks, so a long linear session stays flat (one query, no content loaded)."""
    rows = Entry.objects.filter(session_id=session.pk).values_list(
        "id", "parent_id", "kind", "role", "custom_type", Substr("search_text", 1, TREE_TEXT)
    )
    parents: dict[int, int | None] = {}
    about: dict[int, tuple[str, str]] = {}
    for entry_id, parent_id, kind, role, custom_type, text in rows:
        parents[entry_id] = parent_id
        about[entry_id] = (_tree_label(kind, role, custom_type), " ".join(text.split()))
    children = _children(parents)
    leaf = leaf_of(session)
    branch = set(_path_to(leaf, parents))
    lines: list[TreeRow] = []
    stack = [(root, 0) for root in reversed(children.get(None, []))]
    if len(stack) > 1:
        stack = [(root, 1) for root, _ in stack]
    while stack:
        entry_id, depth = stack.pop()
        label, text = about[entry_id]
        under = children.get(entry_id, [])
        lines.append(
            TreeRow(entry_id, depth, label, text, entry_id in branch, entry_id == leaf, len(under))
        )
        deeper = depth + 1 if len(under) > 1 else depth
        stack.extend((child, deeper) for child in reversed(under))
    return lines


def _tree_label(kind: str, role: str, custom_type: str) -> str:
    if kind == Entry.Kind.MESSAGE:
        return {"user": "You", "assistant": "Assistant", "toolResult": "Tool result"}.get(
            role, role
        )
    if kind == Entry.Kind.CUSTOM_MESSAGE and custom_type == "handoff":
        return "Handoff document"
    return kind.replace("_", " ").capitalize()


def _path_to(leaf_id: int | None, parents: Mapping[int, int | None]) -> list[int]:
    """The ids from the root to `leaf_id`, following `parents` (entry id to parent id)."""
    path: list[int] = []
    current = leaf_id
    while current is not None and current in parents:
        path.append(current)
        current = parents[current]
    path.reverse()
    return path


def entries_by_id(ids: Sequence[int]) -> list[Entry]:
    """These entries, in this order (one query)."""
    found = Entry.objects.in_bulk(ids)
    return [found[entry_id] for entry_id in ids if entry_id in found]


def append_message(
    session: ChatSession,
    role: str,
    content: list[dict[str, Any]],
    *,
    status: str = Entry.Status.COMPLETE,
    error: str = "",
    model: str = "",
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    data: dict[str, Any] | None = None,
    with_siblings: bool = False,
) -> Entry:
    """A message under the leaf, made the leaf; `with_siblings`: the entry knows its siblings
    (it was written beside others: the page shows its branch switcher at once)."""
    entry = _append(
        session,
        kind=Entry.Kind.MESSAGE,
        role=role,
        content=content,
        status=status,
        error=error,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        data=data or {},
    )
    if role == Entry.Role.USER and not session.title:
        title = title_from(text_of(content))
        ChatSession.objects.filter(pk=session.pk, title="").update(title=title)
        session.title = title
    if with_siblings:
        entry.siblings = siblings(entry)
    return entry


def title_from(text: str) -> str:
    """A session's title from its first message: the first line that has words, without its
    markdown marks, cut at a word boundary (with an ellipsis) when longer than TITLE_LENGTH."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    first_line = MARKDOWN_LEAD.sub("", first_line) or first_line  # "## Plan", "- [ ] Read…"
    title = " ".join(first_line.split())
    if len(title) <= TITLE_LENGTH:
        return title
    cut = title[: TITLE_LENGTH - 1]
    if title[TITLE_LENGTH - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]  # never half a word, unless the first word is that long
    return cut.rstrip(" ,;:.-") + "…"


def append_custom_message(
    session: ChatSession,
    custom_type: str,
    content: str | list[dict[str, Any]],
    *,
    display: bool = True,
    data: dict[str, Any] | None = None,
) -> Entry:
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return _append(
        session,
        kind=Entry.Kind.CUSTOM_MESSAGE,
        custom_type=custom_type,
        content=content,
        display=display,
        data=data or {},
    )


def append_custom(
    session: ChatSession,
    custom_type: str,
    text: str,
    *,
    data: dict[str, Any] | None = None,
    status: str = Entry.Status.COMPLETE,
    error: str = "",
) -> Entry:
    """A `custom` entry: shown in the transcript, never sent to the model."""
    return _append(
        session,
        kind=Entry.Kind.CUSTOM,
        custom_type=custom_type,
        content=[{"type": "text", "text": text}],
        data=data or {},
        status=status,
        error=error,
    )


def append_tool_result(
    session: ChatSession,
    call_id: str,
    tool_name: str,
    text: str,
    *,
    is_error: bool = False,
    details: dict[str, Any] | None = None,
) -> Entry:
    """A tool's result, as the reference agent stores it: a `toolResult` message naming the call
    it answers (its `details` hold what the tool produced, e.g. the todo list it set)."""
    message: dict[str, Any] = {"toolCallId": call_id, "toolName": tool_name, "isError": is_error}
    if details:
        message["details"] = details
    return append_message(
        session,
        Entry.Role.TOOL_RESULT,
        [{"type": "text", "text": text}],
        data={"message": message},
    )


def append_todos(session: ChatSession, todo_list: Sequence[todos.Todo], source: str) -> Entry:
    """The todo list as the user set it, or as a handoff document seeded it (never sent to the
    model itself: the user's change reaches it as a note before its next turn)."""
    text = todos.checklist(todo_list) or "(empty)"
    return append_custom(
        session, todos.CUSTOM_TYPE, text, data=todos.custom_data(todo_list, source)
    )


def save_partial(session: ChatSession, text: str, purpose: str, model: str) -> None:
    """Keep the reply streaming now (any append clears it): what a crash would lose."""
    ChatSession.objects.filter(pk=session.pk).update(
        partial_text=text, partial_purpose=purpose, partial_model=model
    )


def change_model(session: ChatSession, model: str) -> Entry:
    """Run the session on another model from now on, recorded as the reference agent does."""
    provider = "agentweb" if model == "local" else "anthropic"
    with transaction.atomic():
        entry = _append(
            session,
            kind=Entry.Kind.MODEL_CHANGE,
            data={"fields": {"provider": provider, "modelId": model}},
        )
        ChatSession.objects.filter(pk=session.pk).update(model=model)
    session.model = model
    return entry


def rename(session: ChatSession, title: str) -> str:
    """Give the session a title; returns why it was refused (empty: renamed)."""
    from .forms import RenameForm

    form = RenameForm({"title": title})
    if not form.is_valid():
        return " ".join(str(e) for e in form.errors.get("title", [])) or "Give the session a title."
    session.title = form.cleaned_data["title"]
    ChatSession.objects.filter(pk=session.pk).update(title=session.title)
    return ""


def change_thinking(session: ChatSession, level: str) -> Entry:
    """Think at another level from now on, recorded as the reference agent does."""
    with transaction.atomic():
        entry = _append(
            session,
            kind=Entry.Kind.THINKING_LEVEL_CHANGE,
            data={"fields": {"thinkingLevel": level}},
        )
        ChatSession.objects.filter(pk=session.pk).update(thinking_level=level)
    session.thinking_level = level
    return entry


def _append(session: ChatSession, **fields: Any) -> Entry:
    """Add an entry under the current leaf and make it the leaf, atomically.

    The session's context size follows, as the reference agent estimates it: a reply
    that reports its usage sets it; anything else that reaches the model adds its estimate.
    """
    with transaction.atomic():
        leaf_id = (
            ChatSession.objects.select_for_update()
            .values_list("leaf_id", flat=True)
            .get(pk=session.pk)
        )
        entry = Entry(session_id=session.pk, parent_id=leaf_id, **fields)
        entry.items = coverage.entry_items(entry)
        entry.search_text = searchable(entry.content)
        entry.save(force_insert=True)
        # A handoff sent a fitted request: its usage is not the size of the session's context.
        fitted = entry.data.get("fitted")
        # The API's input_tokens leave out what it read from or wrote to its prompt cache.
        cached = entry.cache_read_tokens + entry.cache_write_tokens
        reported = entry.input_tokens + cached + entry.output_tokens if entry.input_tokens else 0
        reported = 0 if fitted else reported
        added = sum(part.tokens for part in entry_parts(entry))
        size: Any = reported or F("context_tokens") + added
        ChatSession.objects.filter(pk=session.pk).update(
            leaf=entry, updated_at=timezone.now(), context_tokens=size, partial_text=""
        )
    session.leaf = entry
    session.context_tokens = reported or session.context_tokens + added
    return entry


def session_context(session: ChatSession, upto: int | None = None) -> list[LLMMessage]:
    """The context of the session's branch, or of the branch ending at entry `upto`."""
    if upto is None:
        return build_context(get_branch(session))
    return build_context(branch_ending_at(upto, Entry.objects.filter(session_id=session.pk)))


def count_messages(entries: Sequence[Entry]) -> int:
    """How many `message` entries a branch holds (the handoff guard counts these)."""
    return sum(1 for entry in entries if entry.kind == Entry.Kind.MESSAGE)


def owned_session(owner: User, session_id: int) -> ChatSession | None:
    return ChatSession.objects.filter(ChatSession.kept(), pk=session_id, owner=owner).first()


def hand_off(
    old: ChatSession,
    *,
    from_entry: Entry,
    content: str,
    data: dict[str, Any],
    generation_id: str = "",
) -> ChatSession:
    """Create the handed-off session in one transaction (SPEC B6).

    The new session, its lineage, its handoff message and the prompts still
    queued in the old session (B10) are written together or not at all. A
    running generation's claim moves with them, so it goes on in the new session.
    """
    from . import handoff

    with transaction.atomic():
        new = new_session(
            old.owner,
            model=old.model,
            title=old.title,
            parent_session=old,
            handed_off_from=from_entry,
        )
        append_custom_message(new, handoff.CUSTOM_TYPE, content, display=True, data=data)
        # H14: the todo list reloads in the new session, from the document's open work.
        if seeded := todos.from_document(handoff.unwrap(content)):
            append_todos(new, seeded, "handoff")
        PendingPrompt.objects.filter(session_id=old.pk).update(session_id=new.pk)
        if generation_id:
            _move_claim(old, new, generation_id)
    return new


def _move_claim(old: ChatSession, new: ChatSession, generation_id: str) -> None:
    fields = ChatSession.objects.filter(pk=old.pk).values(
        "generation_kind", "generation_channel", "generation_started_at", "generation_lease_until"
    )[0]
    ChatSession.objects.filter(pk=new.pk).update(generation_id=generation_id, **fields)
    ChatSession.objects.filter(pk=old.pk, generation_id=generation_id).update(
        generation_id="", generation_kind="", generation_channel="", generation_lease_until=None
    )


def expand_prompt_template(session: ChatSession, text: str) -> str:
    """`/name args` becomes the owner's template `name`, with `$ARGUMENTS` replaced by args."""
    match = TEMPLATE_CALL.match(text)
    if not match:
        return text
    template = PromptTemplate.objects.filter(owner_id=session.owner_id, name=match["name"]).first()
    if template is None:
        return text
    return template.body.replace("$ARGUMENTS", (match["args"] or "").strip())


def template_names(owner_id: int) -> frozenset[str]:
    return frozenset(
        PromptTemplate.objects.filter(owner_id=owner_id).values_list("name", flat=True)
    )
