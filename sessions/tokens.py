"""Tokens: the safe-side estimate agentweb counts with, and the usage a model call reports.

Pure, and at the bottom of the house: the providers (the network edge) and the domain both
count with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


def estimate_tokens(text: str) -> int:
    """Tokens a text costs, estimated on the safe side: a token per three bytes of UTF-8.

    The reference agent divides characters by four. Code and CJK text tokenize denser
    than that, and an underestimate means the API refuses the request, so agentweb
    counts UTF-8 bytes (a CJK character is three) and divides by three.
    """
    return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 3) if text else 0


def message_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """The estimate of an LLM message list's text blocks."""
    return sum(
        estimate_tokens(block.get("text", ""))
        for message in messages
        for block in message["content"]
        if isinstance(block, dict)
    )


@dataclass(frozen=True)
class Usage:
    """Tokens used: plain input, output, and input read from or written to the prompt cache
    (priced apart). A provider reports the tokens; `usage.priced` adds what they cost, in US
    dollars (None: a model without a price was used)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: Decimal | None = Decimal(0)

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            cost,
        )

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write
