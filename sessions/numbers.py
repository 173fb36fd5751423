"""The one reading of a whole number given from outside (a URL, a form, a WebSocket frame, a
field of an imported file, a model's tool input): ASCII digits only, and small enough for a
database integer. No Django here: the pure layer (`shapes`) reads through it.

`str.isdigit()` accepts "²" and `int()` accepts "٣", " 7 " and "1_000"; neither is an id a
page of agentweb writes, so neither is read as one.
"""

from __future__ import annotations

import re
from typing import Any

DIGITS = re.compile(r"[0-9]{1,19}")
LARGEST = 2**63 - 1  # the largest integer SQLite and PostgreSQL's bigint keep


def whole_number(value: Any, *, largest: int = LARGEST) -> int | None:
    """`value` as a whole number from 0 to `largest`, or None: a string of ASCII digits, or a
    JSON integer (never a boolean)."""
    if isinstance(value, str):
        number = int(value) if DIGITS.fullmatch(value) else None
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        number = None
    return number if number is not None and 0 <= number <= largest else None


def entry_id_of(value: Any) -> int:
    """An entry id, or 0 (no entry has it)."""
    return whole_number(value) or 0
