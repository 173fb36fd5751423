"""The agent: the runtime around one session (session.py), the reply streamer (streamer.py),
the tools and their loop (tool.py, tools.py, todo_write.py), and the handoff run
(handoff_run.py, handoff_notes.py, handoff_switch.py). Which provider a session's model runs
on: provider.py."""

from ..handoff import NothingToHandOff
from .events import AgentEvent
from .handoff_run import HandoffCancelled, HandoffFailed, HandoffResult
from .session import AgentSession

__all__ = [
    "AgentEvent",
    "AgentSession",
    "HandoffCancelled",
    "HandoffFailed",
    "HandoffResult",
    "NothingToHandOff",
]
