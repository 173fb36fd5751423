"""What a tab that (re)connects, or fell out of step, is sent to catch up: the entries newer than
the last it shows (at most LIMIT, rendered PAGE at a time), the status line, the tool calls'
open questions, and where the running job is to ask for the rest."""

from __future__ import annotations

from typing import Any

from .. import partials, status, store
from ..models import ChatSession, Entry, ToolQuestion
from ..transcript import fold

LIMIT = 200  # entries a catch-up sends at most (a reload shows the rest)
PAGE = 50  # entries rendered in one database call


def state(session_id: int, after: int) -> dict[str, Any] | None:
    """What a tab needs to catch up from entry `after`; None: the session is gone."""
    session = ChatSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    newer = [entry_id for entry_id, _ in store.branch_outline(session) if entry_id > after]
    shown = newer[-LIMIT:]
    return {
        "after": max([after, *newer]),
        "newer": Entry.in_order(shown),
        "skipped": len(newer) - len(shown),
        "status": partials.status(session, status.read(session))
        + partials.questions(ToolQuestion.open_in(session.pk, session.generation_id)),
        "channel": session.generation_channel if session.is_generating else "",
        "claimed": session.generation_id,
    }


def rendered(entries: list[Any]) -> list[str]:
    return [partials.entry(entry) for entry in fold(entries)]


def skipped(count: int) -> str:
    return f"{count:,} earlier new entries are not shown here: reload the page to see them."
