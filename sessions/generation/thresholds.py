"""The owner's automatic-handoff threshold: whether a prompt would take a session's context past
it (`handoff_due`), and the same as a condition of the session's row, for a prompt stored with
its claim (`LEAF_IF_UNHINDERED`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan

from .. import status
from ..models import ChatSession, Entry, PendingPrompt, Preferences
from ..providers import catalog
from ..statements import Statement
from ..tokens import estimate_tokens


def handoff_due(session: ChatSession, threshold_percent: int, text: str) -> bool:
    """Whether `text` would take the session's context past `threshold_percent` of its
    model's window (and there is something to hand off)."""
    projected = session.context_tokens + estimate_tokens(text)
    threshold = catalog.spec(session.model).window * threshold_percent / 100
    if projected < threshold:
        return False
    # Just handed off (the seed alone): the prompt goes here first, never a second handoff in
    # a row.
    if Entry.objects.filter(session_id=session.pk, kind=Entry.Kind.MESSAGE).count() < 2:
        return False
    # Once per crossing: a context that the last handoff or compaction left past the threshold
    # has not crossed it since; and after AGENTWEB_MAX_AUTO_HANDOFFS automatic ones in a row.
    # Either way the status line suggests /handoff, and waits.
    last = status.restart(session)
    if last.tokens is not None and last.tokens >= threshold:
        return False
    return last.automatic_in_a_row < settings.AGENTWEB_MAX_AUTO_HANDOFFS


def _unhindered(
    session_id: int, generation_id: str, model: str, window: int, tokens: int
) -> QuerySet[ChatSession, Any]:
    """The session's leaf, when generation `generation_id` holds its claim, no prompt waits in
    its queue, and a prompt of `tokens` (its estimate, times 100) keeps its context under its
    owner's automatic-handoff threshold of `window` (the window of `model`, the session's
    model): what `first_turn` requires to send a prompt at once, and `handoff_due` to say no
    (it counts the messages only past the threshold)."""
    threshold = Subquery(
        Preferences.objects.filter(user_id=OuterRef("owner_id")).values("auto_handoff_at")
    )
    headroom = Value(window) * F("auto_at") - F("context_tokens") * 100
    return (
        ChatSession.objects.alias(auto_at=Coalesce(threshold, 0))
        .filter(pk=session_id, generation_id=generation_id)
        .filter(~Exists(PendingPrompt.objects.filter(session_id=OuterRef("pk"))))
        .filter(Q(auto_at=0) | Q(model=model) & Q(GreaterThan(headroom, Value(tokens))))
        .values_list("leaf_id")
    )


LEAF_IF_UNHINDERED: Statement[ChatSession] = Statement(
    _unhindered, session_id=int, generation_id=str, model=str, window=int, tokens=int
)
