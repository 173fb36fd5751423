"""A channel layer of one process, in memory, on Channels' documented layer interface.

Channels' own `InMemoryChannelLayer` scans every channel and every group membership for
expired messages at each `receive` and `group_send`, and starts a task per member at each
`group_send`: with N tabs streaming, O(N²) work a second on the event loop. This one keeps the
layer specification (capacity: `ChannelFull`; expiry of messages and of group memberships; a
channel whose message expired unread is dropped from its groups) with a sweep at most once a
second, and delivers a group message to each member at once. It is one process only: several
processes need REDIS_URL (`foundation.layers.bus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import deque
from copy import copy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

SWEEP_SECONDS = 1.0  # expired messages and memberships are dropped at most this late


class Channel:
    """One channel's messages (each with when it expires), and the receives waiting on it."""

    __slots__ = ("messages", "waiting")

    def __init__(self) -> None:
        self.messages: deque[tuple[float, dict[str, Any]]] = deque()
        self.waiting: deque[asyncio.Future[None]] = deque()

    def drop_expired(self, now: float) -> bool:
        """Drop the messages that expired unread; whether there were any."""
        dropped = False
        while self.messages and self.messages[0][0] < now:
            self.messages.popleft()
            dropped = True
        return dropped

    def wake(self) -> None:
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class MemoryChannelLayer(BaseChannelLayer):  # type: ignore[misc]
    extensions = ["groups", "flush"]

    def __init__(
        self,
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: dict[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(expiry=expiry, capacity=capacity)
        self.channel_capacity = self.compile_capacities(channel_capacity or {})
        self.group_expiry = group_expiry
        self.channels: dict[str, Channel] = {}
        self.groups: dict[str, dict[str, float]] = {}  # group → its channels, when each joined
        self.swept_at = time.monotonic()

    # --- channels -----------------------------------------------------------------------
    async def new_channel(self, prefix: str = "specific.") -> str:
        return f"{prefix}.inmemory!{secrets.token_hex(8)}"

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        self.sweep()
        if not self.put(channel, message, copied=False):
            raise ChannelFull(channel)

    def put(self, channel: str, message: dict[str, Any], *, copied: bool = True) -> bool:
        """`message` into `channel` (a shallow copy, for a group's members: messages hold
        strings and numbers); False when the channel is full."""
        held = self.channels.get(channel)
        if held is None:
            held = self.channels[channel] = Channel()
        if len(held.messages) >= self.get_capacity(channel):
            return False
        held.messages.append((time.monotonic() + self.expiry, copy(message) if copied else message))
        held.wake()
        return True

    async def receive(self, channel: str) -> dict[str, Any]:
        """The channel's next message, waiting for one. A channel is kept only while it holds
        messages or a receive waits on it."""
        self.require_valid_channel_name(channel)
        held = self.channels.get(channel)
        if held is None:
            held = self.channels[channel] = Channel()
        try:
            while True:
                held.drop_expired(time.monotonic())
                if held.messages:
                    return held.messages.popleft()[1]
                waiter = asyncio.get_running_loop().create_future()
                held.waiting.append(waiter)
                try:
                    await waiter
                finally:
                    with contextlib.suppress(ValueError):
                        held.waiting.remove(waiter)
        finally:
            if not held.messages and not held.waiting and self.channels.get(channel) is held:
                del self.channels[channel]

    # --- groups -------------------------------------------------------------------------
    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        self.groups.setdefault(group, {})[channel] = time.monotonic()

    async def group_discard(self, group: str, channel: str) -> None:
        members = self.groups.get(group)
        if members is not None:
            members.pop(channel, None)
            if not members:
                del self.groups[group]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """`group_send`, in the caller's step: it never waits (the relay's batches). A member
        too full to take it misses it, as the specification allows."""
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self.sweep()
        for channel in list(self.groups.get(group, ())):
            self.put(channel, message)

    # --- expiry -------------------------------------------------------------------------
    def sweep(self) -> None:
        """At most once a second: drop messages that expired unread (their channel, a
        consumer that is gone, leaves its groups) and memberships older than the group expiry."""
        now = time.monotonic()
        if now - self.swept_at < SWEEP_SECONDS:
            return
        self.swept_at = now
        for name, held in list(self.channels.items()):
            if held.drop_expired(now):
                for members in self.groups.values():
                    members.pop(name, None)
            if not held.messages and not held.waiting:
                del self.channels[name]
        joined_before = now - self.group_expiry
        for group, members in list(self.groups.items()):
            for name in [n for n, joined in members.items() if joined < joined_before]:
                del members[name]
            if not members:
                del self.groups[group]

    async def flush(self) -> None:
        self.channels, self.groups = {}, {}

    async def close(self) -> None:
        pass
