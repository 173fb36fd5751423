"""The channel layer of several processes: the in-memory layer of each, joined by Redis.

Written on Channels' documented layer interface (`BaseChannelLayer`, through
`MemoryChannelLayer`) and redis-py's public asyncio API. channels-redis's Pub/Sub layer
subscribes every socket's channel and every group on Redis and publishes each message on its
own: with 200 tabs streaming, every batch of text is a Redis round trip out and a parse in,
even when the job and its tabs share a process. Here (docs/ARCHITECTURE.md, "The bus"):

* a message to a channel or group of this process is delivered here at once, by the in-memory
  layer, with its capacity and expiry;
* a group message also goes to the other processes on one Redis channel every process
  subscribes to, the *bus*, gathered for a few milliseconds into one publish;
* a message to a channel of another process goes at once (a Cancel must not wait) to that
  process's own Redis channel, its *inbox*: a channel's name says which process made it;
* each process subscribes to two Redis channels in all, whatever its sockets, each on a
  connection of its own (a Cancel is not read behind the bus's batches).

Redis's Pub/Sub keeps nothing: a process that is down when a group message goes misses it, and
its tabs, seeing a gap in the numbered events, catch up from the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import weakref
from typing import Any

import msgpack
from redis import asyncio as aioredis

from .memory import MemoryChannelLayer

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.005  # how long a group message waits for others to go to Redis with
RETRY_SECONDS = 1.0  # before subscribing again to a Redis that went away
SUBSCRIBING_SECONDS = 5.0  # the longest a first channel waits for its process's subscriptions


class Link:
    """This process's connection to Redis from one event loop: a client to publish with, the
    subscriptions that read its inbox and the bus, and the group messages waiting to go."""

    def __init__(self, url: str) -> None:
        self.client = aioredis.Redis.from_url(url)
        self.readers: list[asyncio.Task[None]] = []
        self.subscribed: list[asyncio.Event] = []  # set as each reader's subscription holds
        self.outbox: list[tuple[str, dict[str, Any]]] = []
        self.flush_at: asyncio.TimerHandle | None = None
        self.publishing: asyncio.Task[None] | None = None

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        await self.client.aclose()


class BusChannelLayer(MemoryChannelLayer):
    def __init__(
        self,
        hosts: list[Any] | None = None,
        prefix: str = "asgi",
        batch_seconds: float = BATCH_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        host = (hosts or ["redis://localhost:6379"])[0]
        self.url: str = host["address"] if isinstance(host, dict) else host
        self.process = secrets.token_hex(8)  # this process's part of every channel it makes
        self.inbox = f"{prefix}.process.{self.process}"  # its channels' messages from elsewhere
        self.bus = f"{prefix}.bus"  # every process's group messages
        self.prefix = prefix
        self.batch_seconds = batch_seconds
        self.links: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Link] = (
            weakref.WeakKeyDictionary()
        )

    def link(self) -> Link:
        """This event loop's link (a view's `async_to_sync` runs a loop of its own)."""
        loop = asyncio.get_running_loop()
        link = self.links.get(loop)
        if link is None:
            link = self.links[loop] = Link(self.url)
        return link

    # --- channels -----------------------------------------------------------------------
    async def new_channel(self, prefix: str = "specific.") -> str:
        await self.listen()
        return f"{prefix}.{self.process}!{secrets.token_hex(8)}"

    def owner(self, channel: str) -> str:
        """The process that made the channel (empty: a name no process of the bus made)."""
        head, bang, _ = channel.partition("!")
        return head.rpartition(".")[2] if bang else ""

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        owner = self.owner(channel)
        if owner in ("", self.process):
            await super().send(channel, message)
            return
        self.require_valid_channel_name(channel)
        data = msgpack.packb([channel, message])
        await self.link().client.publish(f"{self.prefix}.process.{owner}", data)

    async def receive(self, channel: str) -> dict[str, Any]:
        await self.listen()
        return await super().receive(channel)

    # --- groups -------------------------------------------------------------------------
    async def group_add(self, group: str, channel: str) -> None:
        await self.listen()
        await super().group_add(group, channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Delivered here at once; on the bus with the next batch, which is waited for (a view's
        `async_to_sync` closes its loop right after)."""
        self.group_send_now(group, message)
        link = self.link()
        while link.outbox or link.publishing is not None:
            self.flush_outbox(link)
            if link.publishing is not None:
                await asyncio.shield(link.publishing)
        if not link.readers:  # a loop that only sends (a view's): its connection goes with it
            self.links.pop(asyncio.get_running_loop(), None)
            await link.close()

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        super().group_send_now(group, message)
        link = self.link()
        link.outbox.append((group, message))
        if link.flush_at is None:
            loop = asyncio.get_running_loop()
            link.flush_at = loop.call_later(self.batch_seconds, self.flush_outbox, link)

    def flush_outbox(self, link: Link) -> None:
        """One publish on the bus at a time: what comes while one is under way waits for it and
        goes in the next (a loop too busy for the round trips sends fewer, larger batches)."""
        if link.flush_at is not None:
            link.flush_at.cancel()
            link.flush_at = None
        if link.outbox and link.publishing is None:
            link.publishing = asyncio.ensure_future(self.publish(link))

    async def publish(self, link: Link) -> None:
        try:
            while link.outbox:
                batch, link.outbox = link.outbox, []
                try:
                    await link.client.publish(self.bus, msgpack.packb([self.process, batch]))
                except (aioredis.RedisError, OSError) as error:
                    log.warning("%d group messages did not reach Redis: %s", len(batch), error)
        finally:
            link.publishing = None

    # --- from Redis ---------------------------------------------------------------------
    async def listen(self) -> None:
        """Subscribe, once a loop, to this process's inbox and to the bus, each on a connection
        of its own; the first channel waits until both hold (a message sent to it before then
        would go unheard), for at most SUBSCRIBING_SECONDS (Redis away: it goes on, and its
        readers keep trying)."""
        link = self.link()
        if not link.readers:
            link.subscribed = [asyncio.Event(), asyncio.Event()]
            link.readers = [
                asyncio.ensure_future(self.read(link, self.inbox, self.from_inbox, 0)),
                asyncio.ensure_future(self.read(link, self.bus, self.from_bus, 1)),
            ]
        if not all(ready.is_set() for ready in link.subscribed):
            waits = [ready.wait() for ready in link.subscribed]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), SUBSCRIBING_SECONDS)

    async def read(self, link: Link, name: str, take: Any, index: int) -> None:
        """Each message of Redis channel `name` to `take`, subscribing again after a fault."""
        while True:
            pubsub = link.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(name)
                link.subscribed[index].set()
                async for message in pubsub.listen():
                    take(message["data"])
            except (aioredis.RedisError, OSError) as error:
                log.warning("reading %s from Redis failed (%s): subscribing again", name, error)
                await asyncio.sleep(RETRY_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    def from_inbox(self, data: bytes) -> None:
        channel, message = msgpack.unpackb(data)
        self.put(channel, message, copied=False)

    def from_bus(self, data: bytes) -> None:
        sender, batch = msgpack.unpackb(data)
        if sender == self.process:  # delivered here as they were sent
            return
        for group, message in batch:
            for channel in list(self.groups.get(group, ())):
                self.put(channel, message)

    async def flush(self) -> None:
        """Send what waits for the bus, forget every channel and group, and close this loop's
        connections (a loop that closes; a test's fresh start)."""
        link = self.links.pop(asyncio.get_running_loop(), None)
        if link is not None:
            self.flush_outbox(link)
            if link.publishing is not None:
                await link.publishing
            await link.close()
        await super().flush()

    async def close(self) -> None:
        await self.flush()
