"""The one reading of a whole number given from outside (a URL, a form, a WebSocket frame):
ASCII digits only, and small enough for a database integer.

`str.isdigit()` accepts "²" and `int()` accepts "٣", " 7 " and "1_000"; neither is an id a
page of agentweb writes, so neither is read as one.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms

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


class WholeNumberField(forms.Field):
    """A form's whole number, read by `whole_number` (Django's IntegerField takes "٣")."""

    default_error_messages = {"invalid": "Enter a whole number (digits 0–9)."}

    def __init__(self, *, min_value: int = 0, max_value: int = LARGEST, **kwargs: Any) -> None:
        self.min_value, self.max_value = min_value, max_value
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        number = whole_number(value, largest=self.max_value)
        if number is None or number < self.min_value:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return number
