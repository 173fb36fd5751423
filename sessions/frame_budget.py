"""How many frames a tab's socket may send: a flooding socket is slowed (its consumer lets a
Cancel through whatever the budget says)."""

from __future__ import annotations

import time


class FrameBudget:
    """A token bucket: `rate` frames a second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.updated = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
