"""The caps on what a user runs at once: a session's queued prompts, and the generations of
all of a user's sessions (SPEC B8)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from ..models import ChatSession, PendingPrompt
from ..statements import Statement


def over_a_cap(session: ChatSession, *, queueing: bool) -> str:
    """Why a prompt (`queueing`) or /handoff may not be taken now (empty: it may): a session
    queues at most AGENTWEB_MAX_QUEUED_PROMPTS prompts, and a user runs at most
    AGENTWEB_MAX_GENERATIONS_PER_USER generations at once."""
    counts = GENERATING.first(owner_id=session.owner_id, session_id=session.pk, now=timezone.now())
    running, here = counts or (0, 0)  # one query: how many of the owner's generate, and this?
    if here:
        queued = PendingPrompt.objects.filter(session_id=session.pk).count()
        limit = settings.AGENTWEB_MAX_QUEUED_PROMPTS
        if queueing and queued >= limit:
            return (
                f"{queued} messages are already waiting in this session (the limit is {limit}): "
                "send this one when they have gone."
            )
        return ""
    limit = settings.AGENTWEB_MAX_GENERATIONS_PER_USER
    if running >= limit:
        return (
            f"{running} replies are being generated in your other sessions (the limit is "
            f"{limit}): send this when one of them ends."
        )
    return ""


def _generating(owner_id: int, session_id: int, now: datetime) -> QuerySet[ChatSession, Any]:
    live = Q(generation_lease_until__gt=now)
    return (  # a claim's id is never empty: "> ''" reads only claimed rows, in the owner's index
        ChatSession.objects.filter(owner_id=owner_id, generation_id__gt="")
        .values("owner_id")
        .annotate(
            running=Count("pk", filter=live), here=Count("pk", filter=live & Q(pk=session_id))
        )
        .values_list("running", "here")
    )


GENERATING: Statement[ChatSession] = Statement(
    _generating, owner_id=int, session_id=int, now=datetime
)
