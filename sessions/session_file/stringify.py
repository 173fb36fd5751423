"""JSON as JavaScript's `JSON.stringify` writes it, which is how the reference agent writes its
session files: no spaces, and numbers in JavaScript's form (`0.000005`, `1e-7`, `100`, never
Python's `5e-06`, `1e-07`, `100.0`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any


def stringify(value: Any) -> str:
    """`value` (what `json.loads` makes) as `JSON.stringify(value)` writes it. Dispatched on the
    exact type: an export writes every line of a session through it (24 µs a typical line)."""
    kind = type(value)
    if kind is dict:
        return (
            "{" + ",".join([_string(str(k)) + ":" + stringify(v) for k, v in value.items()]) + "}"
        )
    if kind is list or kind is tuple:
        return "[" + ",".join([stringify(item) for item in value]) + "]"
    write = _SCALARS.get(kind)
    if write is None:  # a subclass (a model's TextChoices member is a str): as its base
        base = next((base for base in _SCALARS if isinstance(value, base)), None)
        if base is None:
            raise TypeError(f"{kind.__name__} is not JSON")
        write = _SCALARS[base]
    return write(value)


def number(value: float) -> str:
    """A float as JavaScript's Number::toString writes it (ECMA-262 §6.1.6.1.20): the shortest
    digits that read back as the same number (Python's `repr` finds the same), placed plainly
    from 1e-7 up to 1e21 and in exponent form outside; NaN and the infinities as null."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()[1:]
    digits = "".join(map(str, digits_tuple)).rstrip("0") or "0"
    trimmed = len("".join(map(str, digits_tuple))) - len(digits)
    k = len(digits)
    n = int(exponent) + trimmed + k  # the decimal point sits after digit n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    power = n - 1
    mark = "+" if power > 0 else "-"
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{mark}{abs(power)}"


_string = json.JSONEncoder(ensure_ascii=False).encode  # a string as JSON.stringify writes it
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: _string,
    bool: lambda value: "true" if value else "false",  # (before int: a bool is an int)
    int: str,
    float: number,
    type(None): lambda value: "null",
}
