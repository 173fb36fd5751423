"""The session manager: the reference agent's session-manager, on the ORM.

Sync functions (call them through `database_sync_to_async` from async code).
Branch walks cost one query however long the session is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from . import coverage
from .context import LLMMessage, build_context, entry_parts
from .models import ChatSession, Entry, PendingPrompt, PromptTemplate, text_of
from .search import searchable

TITLE_LENGTH = 80
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


def leaf_of(session: ChatSession) -> int | None:
    return ChatSession.objects.values_list("leaf_id", flat=True).get(pk=session.pk)


def branch_outline(session: ChatSession) -> list[tuple[int, str]]:
    """(id, role) of each entry from the root to the leaf: the branch without its content, so a
    page can choose which entries to load (one small query for any size)."""
    rows = Entry.objects.filter(session_id=session.pk).values_list("id", "parent_id", "role")
    parents: dict[int, int | None] = {}
    roles: dict[int, str] = {}
    for entry_id, parent_id, role in rows:
        parents[entry_id], roles[entry_id] = parent_id, role
    return [(pk, roles[pk]) for pk in _path_to(leaf_of(session), parents)]


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
) -> Entry:
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
    return entry


def title_from(text: str) -> str:
    """A session's title from its first message: the first line that has words, cut at a word
    boundary (with an ellipsis) when it is longer than TITLE_LENGTH."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
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
    return ChatSession.objects.filter(pk=session_id, owner=owner).first()


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
