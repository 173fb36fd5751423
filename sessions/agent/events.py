"""The agent's events, as the reference agent emits them, and who listens to them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..models import Entry, ToolQuestion


@dataclass(frozen=True)
class AgentEvent:
    """One of agent_start, message_start, message_update, message_end, tool_end, agent_end."""

    type: str
    session_id: int
    role: str = ""
    delta: str = ""
    entry: Entry | None = None
    purpose: str = ""
    stage: str = ""  # which step of a longer generation, e.g. "part 2 of 5" of a handoff's notes
    caller: Entry | None = None  # tool_end: the reply whose call this result answers
    question: ToolQuestion | None = None  # tool_question, tool_answered: the user's say
    index: int = -1  # tool_progress: the call's place in `caller` (its words are in `delta`)


Listener = Callable[[AgentEvent], Awaitable[None]]
Emit = Callable[..., Awaitable[None]]  # emit(type, **fields): an AgentEvent to the listener


async def ignore(event: AgentEvent) -> None:
    """The listener of an agent nobody watches (a test, a bench)."""
    return None
