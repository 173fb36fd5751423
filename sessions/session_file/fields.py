"""The fields of a session file's lines that agentweb reads, each with the type and range it
must have: a line that breaks one is refused, naming the field, before anything is written.

Fields agentweb does not read are kept as they came, whatever they hold.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Any

from django.utils.dateparse import parse_datetime

# The largest token count an entry's columns keep (PositiveIntegerField, on every database).
MAX_TOKENS = 2_147_483_647
TOKEN_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")

Check = Callable[[Any], str]  # what is wrong with a value, in words (empty: nothing)


def string(value: Any) -> str:
    return "" if isinstance(value, str) else "must be a string"


def boolean(value: Any) -> str:
    return "" if isinstance(value, bool) else "must be true or false"


def count(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return "must be a whole, non-negative number"
    return "" if value <= MAX_TOKENS else f"is larger than {MAX_TOKENS:,}"


def obj(value: Any) -> str:
    return "" if isinstance(value, dict) else "must be an object"


def strings(value: Any) -> str:
    ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    return "" if ok else "must be a list of strings"


def timestamp(value: Any) -> str:
    """An ISO date and time that is a moment in UTC too (0001-01-01T00:00:00+01:00 is not)."""
    if not isinstance(value, str):
        return "must be an ISO date and time"
    try:
        moment = parse_datetime(value)
        if moment is not None and moment.tzinfo is not None:
            moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return f"{value[:40]!r} is not a possible date and time"
    return ""


def todo_list(value: Any) -> str:
    """The list a todo entry keeps: an object whose `todos` is a list of objects."""
    if not isinstance(value, dict):
        return "must be an object holding `todos`"
    todos = value.get("todos", [])
    if not isinstance(todos, list) or not all(isinstance(item, dict) for item in todos):
        return "`todos` must be a list of objects"
    return ""


# Per entry type: the fields of its line (a message's: of its `message`) and their checks.
LINE_FIELDS: dict[str, dict[str, Check]] = {
    "*": {"timestamp": timestamp, "customType": string},
    "session": {"title": string, "cwd": string, "version": count},
    "message": {
        "role": string,
        "stopReason": string,
        "errorMessage": string,
        "model": string,
        "provider": string,
        "toolCallId": string,
        "toolName": string,
        "isError": boolean,
        "usage": obj,
        **{f"usage.{name}": count for name in TOKEN_FIELDS},
    },
    "custom_message": {"display": boolean, "details": obj},
    "custom": {"display": boolean},
    "compaction": {"summary": string, "tokensBefore": count},
    "branch_summary": {"summary": string},
    "label": {"label": string},
    "model_change": {"provider": string, "modelId": string, "model": string},
    "thinking_level_change": {"thinkingLevel": string},
}
# What agentweb itself reads from a handoff document's details, and a todo entry's data.
HANDOFF_DETAILS: dict[str, Check] = {
    "warnings": strings,
    "fitted": strings,
    "coverage": obj,
    "context_tokens_before": count,
}


def problem_of(line: dict[str, Any]) -> str:
    """What is wrong with a line's fields, naming the field (empty: nothing)."""
    kind = str(line.get("type"))
    holder = line.get("message") if kind == "message" else line
    if not isinstance(holder, dict):
        return ""
    own = "the message's " if kind == "message" else ""
    nested, inner = _nested(kind, holder)
    for where, checks, values in (
        ("", LINE_FIELDS["*"], line),
        (own, LINE_FIELDS.get(kind, {}), holder),
        (inner, nested, _nested_values(kind, holder)),
    ):
        for name, check in checks.items():
            value = _at(values, name)
            if value is not None and (problem := check(value)):
                return f"{where}`{name}` {problem}."
    return ""


def _at(values: dict[str, Any], name: str) -> Any:
    """The value of a field, or of a dotted field inside one (`usage.input`)."""
    value: Any = values
    for step in name.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return value


def _nested(kind: str, holder: dict[str, Any]) -> tuple[dict[str, Check], str]:
    """The checks of the fields agentweb reads inside a field, and how to name their place."""
    if kind == "custom_message" and holder.get("customType") == "handoff":
        return HANDOFF_DETAILS, "the handoff's `details`: "
    if kind == "custom" and holder.get("customType") == "todos":
        return {"data": todo_list}, "the todo list's "
    if kind == "message" and holder.get("toolName") == "todo_write":
        return {"details": todo_list}, "the todo_write result's "
    return {}, ""


def _nested_values(kind: str, holder: dict[str, Any]) -> dict[str, Any]:
    if kind == "custom_message":
        details = holder.get("details")
        return details if isinstance(details, dict) else {}
    return holder
