"""What a session's status line shows, read from the database (true in every process): whether
a generation runs and of which kind, the queue, an interruption, the context before a
handoff, and what the session's replies cost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from . import drafts, shapes, usage
from .models import ChatSession, Entry, PendingPrompt
from .statements import Rows, Statement
from .tallies import sending_reads
from .tokens import Usage


@dataclass(frozen=True)
class StatusLine:
    generating: bool = False
    generation_kind: str = ""
    generation_started_at: datetime | None = None
    queued: int = 0
    interrupted: bool = False
    context_before: int | None = None  # a handed-off session: the old one's context size
    handoff: str = ""  # and its handoff's figures: "186k → 9k tokens, $0.41"
    session_usage: Usage = field(default_factory=Usage)  # handoff drafts never used included
    drafts_unused: Usage = field(default_factory=Usage)  # what those drafts cost
    queue: tuple[
        tuple[int, str, int], ...
    ] = ()  # the prompts waiting (id, text, files), oldest first


def read(session: ChatSession, *, queued: int | None = None) -> StatusLine:
    """The status line of `session`, as just read (`queued`: 0 when the caller knows that no
    prompt waits, and the queue is not read)."""
    seed = SEED.rows(session_id=session.pk) if session.parent_session_id else []
    if queued == 0:  # the caller knows none waits
        return _line(session, [], seed)
    return _line(session, QUEUED.rows(session_id=session.pk), seed)


def read_by_id(session_id: int) -> tuple[ChatSession, StatusLine]:
    """The session, read afresh, and its status line."""
    session = SESSION.one(session_id=session_id)
    return session, read(session)


def sending(session: ChatSession) -> Callable[[], tuple[ChatSession, StatusLine]]:
    """`read_by_id`'s reads sent (within `sent_together`, with what else goes: after a write
    sent before them, they read it), and what gives the session afresh and its line from them
    (after it): one round trip on PostgreSQL, where reading them made three. `session`: as
    known before (its id, and its creation time for the cost's tally)."""
    fresh = SESSION.sending_objects(session_id=session.pk)
    queued = QUEUED.send(session_id=session.pk)
    seeds = SEED.send(session_id=session.pk)
    costs = sending_reads(session, usage.SUMMED)

    def line() -> tuple[ChatSession, StatusLine]:
        found, waiting, seed = fresh(), queued(), seeds()
        with costs:
            if not found:
                raise ChatSession.DoesNotExist(f"no session {session.pk}")
            shown = found[0]
            return shown, _line(shown, waiting, seed if shown.parent_session_id else [])

    return line


def _line(session: ChatSession, queue: Rows, seed: Rows) -> StatusLine:
    """The line of `session`, with the prompts `queue` (id, text each), started by the handoff
    `seed` keeps (none: not handed off)."""
    data = seed[0][0] if seed and isinstance(seed[0][0], dict) else {}
    unused = drafts.unused_usage(session)
    return StatusLine(
        generating=session.is_generating,
        generation_kind=session.generation_kind,
        generation_started_at=session.generation_started_at,
        queued=len(queue),
        queue=tuple((int(pk), str(text), len(files or ())) for pk, text, files in queue),
        interrupted=session.was_interrupted,
        context_before=shapes.count(data.get("context_tokens_before")) if data else None,
        handoff=handoff_figures(data),
        session_usage=usage.of_session(session) + unused,
        drafts_unused=unused,
    )


@dataclass(frozen=True)
class Restart:
    """Where a session's context last started again: its latest compaction, else the handoff
    that began it (its seed); neither for a session begun by hand."""

    automatic_in_a_row: int = 0  # automatic handoffs and compactions in a row up to it
    tokens: int | None = None  # the context just after it


def restart(session: ChatSession) -> Restart:
    """The session's latest compaction, else its seed, as it keeps its figures: one query."""
    if session.compacted_at is not None:
        found = Entry.objects.filter(pk=session.compacted_at).values_list("data", flat=True)
        details = shapes.part(found.first(), "fields", "details")
        in_a_row, after = details.get("automaticInARow"), details.get("tokensAfter")
    elif session.parent_session_id is not None and (seed := SEED.rows(session_id=session.pk)):
        kept = seed[0][0]
        in_a_row, after = kept.get("automatic_in_a_row"), kept.get("context_tokens_after")
    else:
        return Restart()
    return Restart(shapes.count(in_a_row) or 0, shapes.count(after))


def handoff_figures(seed: dict[str, Any]) -> str:
    """A handoff's context before and after, and what writing its document cost, as its new
    session's seed keeps them: "186k → 9k tokens, $0.41" ("" when they are not known)."""
    before = shapes.count(seed.get("context_tokens_before"))
    after = shapes.count(seed.get("context_tokens_after"))
    if before is None or after is None:
        return ""
    cost = seed.get("cost")
    try:
        paid = usage.dollars(Decimal(cost)) if isinstance(cost, str) and cost else ""
    except InvalidOperation:
        paid = ""
    return f"{_thousands(before)} → {_thousands(after)} tokens" + (f", {paid}" if paid else "")


def _thousands(tokens: int) -> str:
    if tokens < 1_000:
        return str(tokens)
    return f"{tokens / 1000:.1f}k".replace(".0k", "k") if tokens < 10_000 else f"{tokens // 1000}k"


SESSION: Statement[ChatSession] = Statement(  # every reply's end reads it
    lambda session_id: ChatSession.objects.filter(pk=session_id), session_id=int
)
QUEUED: Statement[PendingPrompt] = Statement(
    lambda session_id: (
        PendingPrompt.objects.filter(session_id=session_id)
        .order_by("pk")
        .values_list("pk", "text", "attachments")
    ),
    session_id=int,
)
SEED: Statement[Entry] = Statement(  # the seed of a session started by a handoff
    lambda session_id: (
        Entry.objects.filter(session_id=session_id, parent__isnull=True)
        .order_by("pk")
        .values_list("data")[:1]
    ),
    session_id=int,
)
