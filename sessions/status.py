"""What a session's status line shows, read from the database (true in every process): whether
a generation runs and of which kind, the queue, an interruption, the context before a
handoff, and what the session's replies cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from . import shapes, usage
from .models import ChatSession, Entry, PendingPrompt
from .statements import Statement
from .tokens import Usage


@dataclass(frozen=True)
class StatusLine:
    generating: bool = False
    generation_kind: str = ""
    generation_started_at: datetime | None = None
    queued: int = 0
    interrupted: bool = False
    context_before: int | None = None  # a handed-off session: the old one's context size
    session_usage: Usage = field(default_factory=Usage)


def read(session: ChatSession, *, queued: int | None = None) -> StatusLine:
    """The status line of `session`, as just read (`queued`: the prompts waiting, when the
    caller knows them already)."""
    context_before = None
    if session.parent_session_id:
        seed = Entry.objects.filter(session=session, parent__isnull=True).only("data").first()
        context_before = shapes.count(seed.data.get("context_tokens_before")) if seed else None
    return StatusLine(
        generating=session.is_generating,
        generation_kind=session.generation_kind,
        generation_started_at=session.generation_started_at,
        queued=PendingPrompt.objects.filter(session=session).count() if queued is None else queued,
        interrupted=session.was_interrupted,
        context_before=context_before,
        session_usage=usage.of_session(session),
    )


def read_by_id(session_id: int) -> tuple[ChatSession, StatusLine]:
    """The session, read afresh, and its status line."""
    session = SESSION.one(session_id=session_id)
    return session, read(session)


SESSION: Statement[ChatSession] = Statement(  # every reply's end reads it
    lambda session_id: ChatSession.objects.filter(pk=session_id), session_id=int
)
