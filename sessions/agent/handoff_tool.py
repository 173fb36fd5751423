"""`handoff`: the model proposes a handoff (issue 55, item 2). A call asks the user with the
card of a tool that changes things; allowed, `/handoff` runs with the call's focus once the
reply's round ends (the job does it: `Job.take_turns`); denied, the model reads that it was.
Offered unless the user turned off *Let the model propose a handoff*. Its name and input are
part of the operating interface: keep them stable."""

from __future__ import annotations

from typing import Any

from ..models import ChatSession, Preferences
from .tool import Progress, Tool, ToolInputError, ToolResult

NAME = "handoff"
ALLOWED = (
    "The user allowed the handoff: when this reply ends, agentweb writes the handoff document"
    "{focus} and the conversation goes on in a new session that starts from it. End your reply "
    "briefly now."
)


async def propose(arguments: Any, session: ChatSession, progress: Progress) -> ToolResult:
    """The user allowed the call (it asks first): the handoff is due when the reply ends."""
    focus = arguments.get("focus") if isinstance(arguments, dict) else None
    reason = arguments.get("reason", "") if isinstance(arguments, dict) else ""
    if not isinstance(focus, str) or not isinstance(reason, str):
        raise ToolInputError('handoff takes {"focus": string, "reason": string (optional)}.')
    focus = " ".join(focus.split())[:2_000]
    shown = f" with the focus “{focus}”" if focus else ""
    details = {"handoff": {"focus": focus, "reason": " ".join(reason.split())[:2_000]}}
    return ToolResult(ALLOWED.format(focus=shown), details=details)


def proposes(session: ChatSession) -> bool:
    """Whether the owner lets the model propose a handoff (on unless they turned it off), as
    the session's claim read it when it did."""
    return Preferences.of_owner(session, "propose_handoff", "proposes_handoff") is not False


def proposed_focus(details: dict[str, Any]) -> str | None:
    """The focus of an allowed handoff call's result (None: the result is not one)."""
    proposal = details.get(NAME)
    focus = proposal.get("focus") if isinstance(proposal, dict) else None
    return focus if isinstance(focus, str) else None


HANDOFF = Tool(
    name=NAME,
    description=(
        "Propose to hand this conversation off to a fresh session: agentweb writes a "
        "structured handoff document (goal, constraints, progress, decisions, critical "
        "context, next steps) and the work goes on in a new session that starts from it. Use "
        "it when the context is long, when the task has changed, or when you find yourself "
        "going in circles. The user allows or denies it; if allowed, it runs when your reply "
        "ends."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "focus": {
                "type": "string",
                "description": "what the new session should focus on (may be empty)",
            },
            "reason": {"type": "string", "description": "why a fresh session helps now"},
        },
        "required": ["focus"],
    },
    run=propose,
    offered=proposes,
    asks_first=True,
)
