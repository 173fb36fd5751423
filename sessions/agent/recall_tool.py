"""`recall`: the tool with which the model looks things up in the sessions this one came from
(sessions.recall). Its name and input are part of the operating interface: keep them stable."""

from __future__ import annotations

from typing import Any

from .. import recall
from ..models import ChatSession
from ..numbers import whole_number
from .tool import Tool, ToolInputError, ToolResult


def look_up(arguments: Any, session: ChatSession) -> ToolResult:
    """The entries found, one a line, each naming its session and entry; the details keep them
    for the page's links."""
    if not isinstance(arguments, dict) or not isinstance(arguments.get("query"), str):
        raise ToolInputError('recall takes {"query": string, "session": integer (optional)}.')
    given = arguments.get("session")
    only = whole_number(given) if given is not None else None
    if given is not None and only is None:
        raise ToolInputError("`session` must be a session's id (a whole number).")
    query = arguments["query"]
    try:
        found = recall.recall(session, query, only)
    except recall.RecallRefused as refusal:
        raise ToolInputError(str(refusal)) from refusal
    details = recall.as_details(query, found, everywhere=recall.everywhere(session))
    if not found:
        return ToolResult(f"Nothing in the earlier sessions mentions “{query}”.", details=details)
    lines = [f"{len(found)} entries from the earlier sessions, best match first:"]
    lines += [hit.line() for hit in found]
    return ToolResult("\n".join(lines), details=details)


RECALL = Tool(
    name="recall",
    description=(
        "Look up what was said in the sessions this one came from (the session it was handed "
        "off or forked from, and the ones before it) and those its messages mention, or in all "
        "the user's sessions when they allow it, and in this session's own turns above its "
        "latest compaction: the detail a handoff document left out. Ask in "
        "keywords: an entry need not hold every word; those holding the most, and the rarest, "
        "come first, each labelled with its session id and entry id; cite them when you use "
        "them. `session` searches that one only."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "the words to look for"},
            "session": {"type": "integer", "description": "one of those sessions only"},
        },
        "required": ["query"],
    },
    run=look_up,
    offered=recall.offered,
)
