"""Reading stored entries whatever their shape. An entry's `data` holds what a file gave (older
files and other agents write what they like) as well as what agentweb wrote, so every reader
of a field nested in it asks for the shape it needs and takes "absent" for any other shape.

No Django here: the pure layer reads through these.
"""

from __future__ import annotations

from typing import Any

from .numbers import whole_number


def part(value: Any, *path: str) -> dict[str, Any]:
    """The object at `path` inside `value` (an empty one if anything on the way is not an
    object): `part(entry.data, "message", "details")`."""
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def texts(value: Any) -> list[str]:
    """The strings of a list (none, if it is not a list): warnings, notes."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def count(value: Any) -> int | None:
    """A whole, non-negative number a database keeps, or None (booleans, and numbers past
    2⁶³ − 1, are not numbers here: an id of 2⁶⁴ would fail every query that reads it)."""
    return whole_number(value) if isinstance(value, int) else None


def an_id(value: Any) -> int | None:
    """A row's id (a session's, an entry's) as a file or a model may give it, or None."""
    return count(value) or None


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""
