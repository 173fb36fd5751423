"""Reading stored entries whatever their shape. An entry's `data` holds what a file gave (older
files and other agents write what they like) as well as what agentweb wrote, so every reader
of a field nested in it asks for the shape it needs and takes "absent" for any other shape.

No Django here: the pure layer reads through these.
"""

from __future__ import annotations

from typing import Any


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
    """A whole, non-negative number, or None (booleans are not numbers here)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""
