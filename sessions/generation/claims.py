"""Claims and leases: which process runs a session's one generation (SPEC B8, B12).

A claim is a conditional UPDATE of the session row: it succeeds only when no live claim is
there, so two processes cannot both start a generation. A claim holds a lease its process
renews; a claim whose lease ran out belongs to a process that died, and the next claim takes
it over, keeping the reply that process was streaming as an interrupted entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Field, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThan
from django.utils import timezone

from .. import sign_ins
from ..agent.handoff_notes import NOTES
from ..models import ChatSession, Entry, ToolQuestion
from ..models.session import UNCLAIMED
from ..statements import Returning, Update

log = logging.getLogger(__name__)

INTERRUPTED = "A reply was interrupted: the server stopped while it was being generated."
LOST = "another server process took the session over"
UNRENEWABLE = (
    "the database did not take the renewal of its claim on the session in time ({cause}); "
    "the reply so far is kept"
)


def claim(session_id: int, generation_id: str, kind: str, channel: str) -> bool:
    """Take the session's one generation slot with a conditional UPDATE (B8).

    A free slot is taken by one statement. Taking over a claim whose lease ran out (its
    process died) records the interruption in the session's history (B12).
    """
    now = timezone.now()
    taken = dict(
        id=generation_id, kind=kind, channel=channel, now=now, until=ChatSession.lease_until(now)
    )
    if TAKE_FREE.execute(session_id=session_id, **taken):
        return True
    with transaction.atomic():
        previous = ChatSession.objects.filter(pk=session_id).values_list("generation_id", flat=True)
        was_held = bool(previous.first())
        updated = TAKE_LAPSED.execute(session_id=session_id, **taken)
        if updated and was_held:
            record_interruption(session_id)
    return updated == 1


CLAIM = {"id": str, "kind": str, "channel": str, "now": datetime, "until": datetime}


def _claimed_where(
    where: Callable[[dict[str, Any]], Q],
) -> Callable[..., tuple[QuerySet[ChatSession, Any], dict[str, Any]]]:
    """The session's row, where it is `where(claim)`, and its claim's columns as `claim` sets
    them: what an UPDATE that takes a claim changes."""
    return lambda session_id, **claim: (
        ChatSession.objects.filter(where(claim), pk=session_id),
        {
            "generation_id": claim["id"],
            "generation_kind": claim["kind"],
            "generation_channel": claim["channel"],
            "generation_started_at": claim["now"],
            "generation_lease_until": claim["until"],
        },
    )


def _taking(where: Callable[[datetime], Q]) -> Update[ChatSession]:
    """The claim taken where the session's row is `where(now)`: one UPDATE, compiled once."""
    claimed = _claimed_where(lambda claim: where(claim["now"]))
    return Update(claimed, columns=None, session_id=int, **CLAIM)


TAKE_FREE = _taking(lambda now: Q(generation_id=""))
TAKE_LAPSED = _taking(ChatSession.claimable)  # free, or its lease ran out


def taking_free_and_reading(
    read: Callable[[int], QuerySet[ChatSession, Any]],
    *,
    columns: Mapping[str, Field[Any, Any]],
    signed_in: bool = False,
) -> Returning[ChatSession]:
    """The claim taken when the session is free and its owner runs fewer generations than
    `under` (the owner's cap, SPEC B8), and the session read as `read(session_id)` after it:
    one statement where a prompt made three (the owner's count, the claim, the read).

    `signed_in`: a frame's check too, in the same statement: the session is kept, and the
    sign-in is as it last held (its parameters a `sign_ins.Held`'s fields)."""

    def where(claim: dict[str, Any]) -> Q:
        free = Q(generation_id="") & _owner_runs_fewer(claim)
        if not signed_in:
            return free
        held = {name: claim[name] for name in SIGN_IN}
        return free & ChatSession.kept() & sign_ins.unchanged(**held, now=claim["now"])

    return Returning(
        _claimed_where(where),
        lambda session_id, **claim: read(session_id),
        columns=columns,  # the fields of `read`'s annotations
        session_id=int,
        **CLAIM,
        under=int,
        **(SIGN_IN if signed_in else {}),
    )


SIGN_IN = {"key": str, "user_id": int, "data": str, "password": str}  # `sign_ins.Held`'s fields


def _owner_runs_fewer(claim: dict[str, Any]) -> Q:
    """The session's owner holds fewer than `claim["under"]` live claims."""
    live = ChatSession.objects.filter(
        owner_id=OuterRef("owner_id"), generation_id__gt="", generation_lease_until__gt=claim["now"]
    )
    running = live.values("owner_id").annotate(n=Count("pk")).values("n")
    return Q(GreaterThan(Value(claim["under"]), Coalesce(Subquery(running), 0)))


def claim_free(
    taking: Returning[ChatSession],
    session_id: int,
    generation_id: str,
    kind: str,
    channel: str,
    held: sign_ins.Held | None = None,
) -> ChatSession | None:
    """`taking` (`taking_free_and_reading`) run: the session as read after its claim, or None
    when it was not free or its owner was at the cap (`claim` and the caps then say which), or
    (`held`, for a `taking` that is `signed_in`) the sign-in or the session changed."""
    claimed = taking.objects(**claiming(session_id, generation_id, kind, channel, held))
    return claimed[0] if claimed else None


def claiming(
    session_id: int,
    generation_id: str,
    kind: str,
    channel: str,
    held: sign_ins.Held | None = None,
) -> dict[str, Any]:
    """`claim_free`'s values for its `taking`, as of now."""
    now = timezone.now()
    return {
        "session_id": session_id,
        "id": generation_id,
        "kind": kind,
        "channel": channel,
        "now": now,
        "until": ChatSession.lease_until(now),
        "under": settings.AGENTWEB_MAX_GENERATIONS_PER_USER,
        **(vars(held) if held is not None else {}),
    }


def record_interruption(session_id: int) -> None:
    """A claim whose process died: the reply it was streaming, kept, and a note that says so."""
    keep_partial(session_id)
    ChatSession(pk=session_id).append_custom("interrupted", INTERRUPTED)
    ToolQuestion.interrupted(session_id)


def keep_partial(session_id: int) -> None:
    """The reply a dead process was streaming, as last saved: kept as an interrupted entry."""
    session = ChatSession.objects.get(pk=session_id)
    if not session.partial_text:
        return
    if session.partial_purpose == NOTES:
        session.append_custom(
            NOTES, session.partial_text, status=Entry.Status.ABORTED, error="interrupted"
        )
    else:
        purpose = {"purpose": session.partial_purpose} if session.partial_purpose else {}
        session.append_message(
            Entry.Role.ASSISTANT,
            [{"type": "text", "text": session.partial_text}],
            status=Entry.Status.ABORTED,
            error="interrupted",
            model=session.partial_model,
            data=purpose,
        )


def recover_interrupted() -> int:
    """At start-up of a single-process server, no earlier claim can be alive: expire them all,
    keeping the replies they were streaming.

    With a shared channel layer (REDIS_URL) other processes may be generating,
    so their claims are left to expire by their leases.
    """
    if not str(settings.CHANNEL_LAYERS["default"]["BACKEND"]).endswith("MemoryChannelLayer"):
        return 0
    with transaction.atomic():
        for session_id in ChatSession.objects.exclude(generation_id="").values_list(
            "pk", flat=True
        ):
            keep_partial(session_id)
        ToolQuestion.interrupted()
        return ChatSession.objects.exclude(generation_id="").update(
            generation_lease_until=timezone.now(), generation_channel=""
        )


def claim_of(session_id: int) -> tuple[str, float] | None:
    """The session's claim: its generation and the seconds left of its lease (None: none)."""
    row = (
        ChatSession.objects.filter(pk=session_id)
        .values_list("generation_id", "generation_lease_until")
        .first()
    )
    if row is None or not row[0]:
        return None
    generation_id, until = row
    return generation_id, (until - timezone.now()).total_seconds() if until else 0.0


def expire(session_id: int) -> bool:
    """End a claim whose lease ran out (its process died), keeping the reply it was streaming
    as an interrupted entry; False if the claim is alive, or gone, by now."""
    with transaction.atomic():
        row = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if row is None or not row.was_interrupted:
            return False
        record_interruption(session_id)
        ChatSession.objects.filter(pk=session_id).update(**UNCLAIMED)
    return True


def take_back(session_id: int, generation_id: str) -> bool:
    """End the claim of this process's generation `generation_id`, whose job died, as a dead
    process's is ended (`expire`); False if it no longer holds it."""
    with transaction.atomic():
        held = ChatSession.objects.select_for_update().filter(
            pk=session_id, generation_id=generation_id
        )
        if not held.exists():
            return False
        record_interruption(session_id)
        held.update(**UNCLAIMED)
    return True


def set_kind(session_id: int, generation_id: str, kind: str) -> None:
    """The claim's generation is now of another kind (an automatic handoff before a prompt)."""
    ChatSession.objects.filter(pk=session_id, generation_id=generation_id).update(
        generation_kind=kind, generation_started_at=timezone.now()
    )


def release(session_id: int, generation_id: str) -> None:
    """Give the claim up, if this generation still holds it."""
    RELEASE.execute(session_id=session_id, generation_id=generation_id)


RELEASE: Update[ChatSession] = Update(
    lambda session_id, generation_id: (
        ChatSession.objects.filter(pk=session_id, generation_id=generation_id),
        UNCLAIMED,
    ),
    session_id=int,
    generation_id=str,
)


def renew_all(generation_ids: list[str]) -> set[str]:
    """Renew these claims in one UPDATE; the ids still held (a claim moves with a handoff)."""
    ChatSession.objects.filter(generation_id__in=generation_ids).update(
        generation_lease_until=ChatSession.lease_until()
    )
    return set(
        ChatSession.objects.filter(generation_id__in=generation_ids).values_list(
            "generation_id", flat=True
        )
    )


class Leases:
    """Keeps the claims of this process's generations alive, all of them in one UPDATE a few
    times per lease (one per generation cost most of the database thread under load).

    A failed renewal is logged and retried sooner; a claim another process has taken, or one
    that cannot be renewed before it would run out, ends with its reason. `clock` and `sleep`
    are the event loop's unless a test gives its own.
    """

    def __init__(
        self,
        renew: Callable[[list[str]], Awaitable[set[str]]],
        seconds: Callable[[], float],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.renew = renew
        self.seconds = seconds
        self.clock = clock
        self.sleep = sleep
        self.held: dict[str, asyncio.Future[str]] = {}
        self.task: asyncio.Task[None] | None = None

    def hold(self, generation_id: str) -> asyncio.Future[str]:
        """A future that resolves with the reason, when this generation's claim is lost."""
        lost = self.held[generation_id] = asyncio.get_running_loop().create_future()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.keep())
        return lost

    def drop(self, generation_id: str) -> None:
        self.held.pop(generation_id, None)

    async def keep(self) -> None:
        renewed_at = self.clock()
        delay = self.seconds() / 3
        while self.held:
            await self.sleep(delay)
            held = [gid for gid, lost in self.held.items() if not lost.done()]
            if not held:
                continue
            try:
                kept = await self.renew(held)
            except Exception as error:
                # expected while the database is away: said in a line, not a traceback
                log.warning(
                    "renewing the claims of generations failed (%s); retrying", _cause(error)
                )
                if self.clock() - renewed_at > self.seconds() * 0.8:
                    # they may run out before the next try
                    self._lose(held, UNRENEWABLE.format(cause=_cause(error)))
                delay = min(1.0, self.seconds() / 10)
                continue
            self._lose([gid for gid in held if gid not in kept], LOST)
            renewed_at, delay = self.clock(), self.seconds() / 3

    def _lose(self, generation_ids: list[str], reason: str) -> None:
        for generation_id in generation_ids:
            lost = self.held.pop(generation_id, None)
            if lost is not None and not lost.done():
                lost.set_result(reason)


def _cause(error: Exception) -> str:
    """The database's own words, as a person can read them."""
    words = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"it answered “{words[:200]}”"


_leases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Leases] = weakref.WeakKeyDictionary()


def leases() -> Leases:
    """This process's (this event loop's) keeper of claims."""
    loop = asyncio.get_running_loop()
    if loop not in _leases:
        _leases[loop] = Leases(
            database_sync_to_async(renew_all), lambda: settings.AGENTWEB_GENERATION_LEASE
        )
    return _leases[loop]
