"""Session care: what can still be restored after a delete, and the purge of the rest.

Pin, archive and delete are the session's own methods (`ChatSession.set_pinned`,
`set_archived`, `soft_delete`).

A deleted session is out of sight at once (the list, search, its pages and socket) but kept
for AGENTWEB_UNDO_DELETE_SECONDS, so a delete by mistake can be undone; after that it is
purged with its entries. Sessions deleted together (a whole chain) come back together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone

from .models import ChatSession, building


def restore(owner: User, session_id: int) -> int:
    """Bring back a deleted session and those deleted with it; how many (0: too late)."""
    deleted = _restorable(owner).filter(pk=session_id).values_list("deleted_at", flat=True)
    moment = deleted.first()
    if moment is None:
        return 0
    return _restorable(owner).filter(deleted_at=moment).update(deleted_at=None)


@dataclass(frozen=True)
class Deleted:
    """Sessions deleted together, as the list offers them back."""

    sessions: list[ChatSession]
    deleted_at: datetime

    @property
    def first(self) -> ChatSession:
        return self.sessions[0]

    @property
    def until(self) -> datetime:
        return self.deleted_at + timedelta(seconds=settings.AGENTWEB_UNDO_DELETE_SECONDS)


def recently_deleted(owner: User) -> list[Deleted]:
    """What can still be restored, the latest deletion first."""
    groups: dict[datetime, list[ChatSession]] = {}
    for session in _restorable(owner).order_by("-deleted_at", "created_at", "pk"):
        assert session.deleted_at is not None
        groups.setdefault(session.deleted_at, []).append(session)
    return [Deleted(sessions, moment) for moment, sessions in groups.items()]


# A session nobody touched: nothing written in it, no title given, not pinned. The list does
# not show one (but for the page it is open on), and it goes after UNTOUCHED_FOR.
UNTOUCHED = Q(leaf__isnull=True, title="", pinned=False, generation_id="")
UNTOUCHED_FOR = timedelta(days=1)


def purge(owner: User | None = None) -> int:
    """Delete for good what was deleted longer ago than the undo time, the forks a process
    that died left half made, and the sessions left untouched for a day; how many sessions.
    A large session's entries go a batch per transaction, so no other user waits on it."""
    abandoned = UNTOUCHED & Q(updated_at__lt=timezone.now() - UNTOUCHED_FOR)
    expired = ChatSession.objects.filter(
        Q(deleted_at__lt=_oldest_restorable()) | building.abandoned() | abandoned
    ).exclude(pending_prompts__isnull=False)
    return _purged(expired if owner is None else expired.filter(owner=owner))


def purge_abandoned() -> int:
    """At start-up: the forks and imports a stopped process left half made, whoever's."""
    return _purged(ChatSession.objects.filter(building.abandoned()))


def _purged(sessions: QuerySet[ChatSession]) -> int:
    purged = 0
    for session_id in sessions.values_list("pk", flat=True):
        building.delete_entries(session_id)
        purged += ChatSession.objects.filter(pk=session_id).delete()[1].get("chat.ChatSession", 0)
    return purged


def deleted_one(owner: User, session_id: int) -> Deleted | None:
    """The owner's session `session_id` when it is deleted and can still be restored."""
    session = _restorable(owner).filter(pk=session_id).first()
    if session is None or session.deleted_at is None:
        return None
    return Deleted([session], session.deleted_at)


def _restorable(owner: User) -> QuerySet[ChatSession]:
    return ChatSession.objects.filter(owner=owner, deleted_at__gte=_oldest_restorable())


def _oldest_restorable() -> datetime:
    return timezone.now() - timedelta(seconds=settings.AGENTWEB_UNDO_DELETE_SECONDS)
