"""Handoff drafts (issue 55): the handoff document of a long session, written while it is idle,
so that `/handoff` switches without waiting for the model.

A draft is written once a session's context passes its owner's *Prepare the handoff in the
background from N %* (default 60 %), after a reply ends. It holds the leaf it was written at:
it is used only while the session has not moved on since, and for the same focus. One writer
at a time per session, across processes: the row's lease (`writing_until`) is taken by a
conditional UPDATE.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from . import context, handoff, usage
from .context import LLMMessage
from .models import ChatSession, Entry, HandoffDraft, Preferences
from .providers import catalog
from .tokens import Usage

DEFAULT_FROM = 60  # percent of the window, for an owner who never saved preferences
LEASE = timedelta(minutes=5)  # a writer that stopped without a word frees the draft then


def due(session: ChatSession) -> bool:
    """Whether the session's context has passed its owner's share for a draft (0: never), and
    it holds something to hand off."""
    share = (
        Preferences.objects.filter(user_id=session.owner_id)
        .values_list("draft_handoff_at", flat=True)
        .first()
    )
    share = DEFAULT_FROM if share is None else share
    if not share or session.leaf_id is None:
        return False
    if session.context_tokens * 100 < catalog.spec(session.model).window * share:
        return False
    messages = Entry.objects.filter(session_id=session.pk, kind=Entry.Kind.MESSAGE)
    return messages.count() >= 2  # as /handoff requires (`handoff.check_guard`)


def claim(session: ChatSession, writer: str) -> bool:
    """The lease to write the session's draft at its leaf, when no one holds it and no draft
    of that leaf is ready."""
    now = timezone.now()
    free = Q(writing_until__isnull=True) | Q(writing_until__lt=now)
    written = Q(leaf_id=session.leaf_id, focus="") & ~Q(document="")
    changes = {"writer": writer, "writing_until": now + LEASE}
    drafts = HandoffDraft.objects.filter(session_id=session.pk)
    # The document written before stays until the new one is kept: the new one may be that
    # document brought up to date (`behind`), and a `/handoff` meanwhile may do the same.
    if drafts.filter(free).exclude(written).update(**changes):
        return True
    if drafts.exists():
        return False
    try:
        with transaction.atomic():
            HandoffDraft.objects.create(session_id=session.pk, **changes)
    except IntegrityError:  # another writer made it first
        return False
    return True


def keep(session_id: int, writer: str, leaf: int, document: str, model: str, usage: Usage) -> bool:
    """The document written at entry `leaf`, kept as the session's draft (when the writer still
    holds it), and the session's row told which leaf it was written at: its status line says it
    is ready."""
    with transaction.atomic():
        held = HandoffDraft.objects.select_for_update().filter(session_id=session_id, writer=writer)
        before = held.first()
        if before is None:
            return False
        held.update(
            unused=_spent(before),
            leaf_id=leaf,
            focus="",
            document=document,
            model=model,
            input_tokens=usage.input,
            output_tokens=usage.output,
            cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write,
            writer="",
            writing_until=None,
        )
        ChatSession.objects.filter(pk=session_id).update(draft_at=leaf)
    return True


def moved_on(session_id: int, leaf: int | None) -> bool:
    """Whether the session left the leaf a draft is being written at, or a generation took it,
    in whatever process (or it is gone)."""
    same = ChatSession.objects.filter(pk=session_id, leaf_id=leaf, generation_id="")
    return not same.exists()


def _spent(draft: HandoffDraft) -> dict[str, list[int]]:
    """The draft's `unused` with its own document's tokens added: that document is never used."""
    unused = {model: list(counts) for model, counts in draft.unused.items()}
    tokens = [
        draft.input_tokens,
        draft.output_tokens,
        draft.cache_read_tokens,
        draft.cache_write_tokens,
    ]
    if draft.document and any(tokens):
        before = unused.get(draft.model, [0, 0, 0, 0])
        unused[draft.model] = [a + b for a, b in zip(before, tokens, strict=True)]
    return unused


def taken(session_id: int, *, used: bool) -> None:
    """A `/handoff` took the session's draft: `used`, its tokens are its reply's now; otherwise
    it was the base of a short update, and they count as unused. Either way it is gone."""
    draft = HandoffDraft.objects.filter(session_id=session_id).first()
    if draft is None:
        return
    HandoffDraft.objects.filter(pk=draft.pk).update(
        unused=draft.unused if used else _spent(draft),
        document="",
        input_tokens=0,
        output_tokens=0,
        cache_read_tokens=0,
        cache_write_tokens=0,
    )


def unused_usage(session: ChatSession) -> Usage:
    """What the session's drafts not used by a `/handoff` cost: those replaced, and the one
    kept now (a `/handoff` that uses it moves its tokens to its reply). No query for a session
    that never had a draft."""
    if session.draft_at is None:
        return Usage()
    draft = HandoffDraft.objects.filter(session_id=session.pk).first()
    total = Usage()
    for model, counts in (_spent(draft) if draft else {}).items():
        total += usage.priced(model, *counts)
    return total


def release(session_id: int, writer: str) -> None:
    """The lease given up, whatever came of the writing."""
    HandoffDraft.objects.filter(session_id=session_id, writer=writer).update(
        writer="", writing_until=None
    )


def ready(session: ChatSession, focus: str) -> HandoffDraft | None:
    """The session's draft, when it is written at the session's leaf for this focus."""
    return (
        HandoffDraft.objects.filter(session_id=session.pk, leaf_id=session.leaf_id, focus=focus)
        .exclude(document="")
        .first()
    )


UPDATE_REACH = 40  # entries past a draft that a short request brings it up to date with


def behind(
    session_id: int, branch: Sequence[Entry], budget: int
) -> tuple[HandoffDraft, list[LLMMessage]] | None:
    """The session's draft (of no focus) when it was written at an earlier entry of `branch`
    and the entries after it are few (UPDATE_REACH) and short (half of `budget` tokens): the
    draft, and the short request that brings it up to date with them."""
    draft = (
        HandoffDraft.objects.filter(session_id=session_id, focus="").exclude(document="").first()
    )
    if draft is None:
        return None
    at = next((n for n, entry in enumerate(branch) if entry.pk == draft.leaf_id), None)
    if at is None or not 0 < len(branch) - at - 1 <= UPDATE_REACH:
        return None
    later = context.context_parts(branch[at + 1 :])
    if sum(part.tokens for part in later) > budget // 2:
        return None
    asked = handoff.update_request(draft.document, context.serialize(later))
    return draft, [{"role": context.USER, "content": [{"type": "text", "text": asked}]}]
