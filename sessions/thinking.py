"""Thinking levels: how much Claude thinks before it replies (extended thinking).

A session's level is the latest `thinking_level_change` entry on its branch (the reference
agent's record), kept in `ChatSession.thinking_level` too so a reply reads it without a walk.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import shapes
from .content import EntryLike, Kind
from .shapes import part

OFF = "off"
# The level's thinking budget, in tokens (Claude needs at least 1,024 when it thinks).
BUDGETS = {OFF: 0, "low": 2_048, "medium": 8_192, "high": 24_576}
LEVELS = tuple(BUDGETS)


def budget(level: str) -> int:
    return BUDGETS.get(level, 0)


def unknown(level: str) -> str:
    return f"Unknown thinking level “{level}”: choose off, low, medium or high."


def level_on(branch: Sequence[EntryLike]) -> str:
    """The level a branch ends at: its latest thinking_level_change, else off."""
    for entry in reversed(branch):
        if entry.kind == Kind.THINKING_LEVEL_CHANGE:
            level = shapes.text(part(entry.data, "fields").get("thinkingLevel"))
            return level if level in BUDGETS else OFF
    return OFF
