"""Channels' in-memory layer, without its quadratic cost under many sockets.

The stock layer scans every channel and every group membership for expired messages on
each `receive` and `group_send`, and starts a task per member on each `group_send`: with N
tabs streaming, that is O(N²) work per second on the event loop. This one sweeps at most
once a second (messages still expire, a second late at most) and delivers a group message
directly. It is still one process only: several processes need REDIS_URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from copy import copy
from typing import Any

from channels.layers import InMemoryChannelLayer as StockInMemoryChannelLayer

SWEEP_SECONDS = 1.0


class InMemoryChannelLayer(StockInMemoryChannelLayer):  # type: ignore[misc]
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._swept_at = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._swept_at >= SWEEP_SECONDS:
            self._swept_at = now
            super()._clean_expired()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """`group_send`, in the caller's step: it never waits (the relay's batches)."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        expires = time.time() + self.expiry
        for channel in list(self.groups.get(group, {})):
            queue = self.channels.get(channel)
            if queue is None:
                queue = asyncio.Queue(maxsize=self.get_capacity(channel))
                self.channels[channel] = queue
            # A shallow copy each (messages hold strings and numbers); a member too slow to
            # take it is skipped, as the stock layer does.
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait((expires, copy(message)))

    async def receive(self, channel: str) -> Any:
        """The stock receive, without the new queue it makes (and drops) at every call: a
        channel's queue is made when a message or a receiver first needs it, and dropped, as
        the stock layer drops it, each time a receive empties it."""
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            _, message = await queue.get()
        finally:
            if queue.empty():
                self.channels.pop(channel, None)
        return message
