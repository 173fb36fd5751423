"""A Redis channel layer whose cost is a process's, not a socket's or a message's.

channels-redis's Pub/Sub layer subscribes every socket's channel and every group on Redis and
publishes each message on its own: with 200 tabs streaming, every batch of text is a Redis
round trip out and a parse in, even when the job and its tabs share a process, and Redis keeps
a subscription per socket. Here (docs/PERFORMANCE.md, "The bus"):

* a message to a channel or group of this process is delivered here at once, as the in-memory
  layer delivers it;
* a group message also goes to the other processes on one channel every process subscribes
  to, the *bus*, gathered for a few milliseconds into one publish;
* a message to a channel of another process goes at once (a Cancel must not wait) to that
  process's own channel: a channel's name says which process owns it;
* each process subscribes to two Redis channels in all, whatever its sockets, each on a
  connection of its own (a Cancel is not read behind the bus's batches).

A process reads every batch on the bus, its groups or not; it unpacks a batch's envelope, not
the messages of groups it has no member of. Channels not made by `new_channel` (named worker
channels) keep channels-redis's own subscription per channel.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import msgpack
from channels_redis.pubsub import (
    RedisPubSubChannelLayer,
    RedisPubSubLoopLayer,
    RedisSingleShardConnection,
)
from channels_redis.utils import _consistent_hash, _wrap_close, decode_hosts

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.005  # how long a group message waits for others to go to Redis with


class RedisBusChannelLayer(RedisPubSubChannelLayer):  # type: ignore[misc]
    """The layer Django Channels is given: one `BusLoopLayer` per event loop, as channels-redis
    keeps one of its own per loop."""

    def _get_layer(self) -> BusLoopLayer:
        loop = asyncio.get_running_loop()
        layer: BusLoopLayer | None = self._layers.get(loop)
        if layer is None:
            layer = BusLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            self._layers[loop] = layer
            _wrap_close(self, loop)  # a loop that closes flushes its layer first
        return layer

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """`group_send`, in the caller's step (the relay's batches): no proxy coroutine, and
        nothing to wait for (the bus's publish is batched)."""
        self._get_layer().group_send_now(group, message)


class BusLoopLayer(RedisPubSubLoopLayer):  # type: ignore[misc]
    def __init__(
        self, hosts: Any = None, *, batch_seconds: float = BATCH_SECONDS, **kwargs: Any
    ) -> None:
        super().__init__(hosts, **kwargs)
        self.process = uuid.uuid4().hex  # this loop's part of every channel name it makes
        self.inbox = f"{self.prefix}__process__{self.process}"  # its channels' messages
        self.bus = f"{self.prefix}__bus__"  # every process's group messages
        self.batch_seconds = batch_seconds
        self._shards = [BusShard(host, self) for host in decode_hosts(hosts)]
        # The inbox's own subscriptions, one a Redis: a Cancel is read at once, not behind the
        # bus's batches on a connection they keep busy.
        self._inbox_shards = [BusShard(host, self) for host in decode_hosts(hosts)]
        self.members: dict[str, set[str]] = {}  # group → this process's channels in it
        self.outbox: list[tuple[str, bytes]] = []  # group messages not yet on the bus
        self._flush_at: asyncio.TimerHandle | None = None
        self._publishing: set[asyncio.Task[None]] = set()
        self._listening = False

    # --- channels -----------------------------------------------------------------------
    def _owner(self, channel: str) -> str:
        """The process that made a channel of `new_channel`'s (empty for any other name)."""
        head, bang, _ = channel.partition("!")
        start = f"{self.prefix}specific."
        return head[len(start) :] if bang and head.startswith(start) else ""

    async def new_channel(self, prefix: str = "specific.") -> str:
        if prefix != "specific.":
            return str(await super().new_channel(prefix))
        channel = f"{self.prefix}specific.{self.process}!{uuid.uuid4().hex}"
        self.channels[channel] = asyncio.Queue()
        await self._listen()
        return channel

    async def receive(self, channel: str) -> Any:
        if self._owner(channel) != self.process:
            return await super().receive(channel)
        queue = self.channels.get(channel)
        if queue is None:  # received from before `new_channel` (or again after a cancel)
            queue = self.channels[channel] = asyncio.Queue()
            await self._listen()
        try:
            data = await queue.get()
        except (asyncio.CancelledError, TimeoutError, GeneratorExit):
            # As channels-redis assumes: a cancelled receive is its consumer leaving.
            self.channels.pop(channel, None)
            raise
        return self.channel_layer.deserialize(data)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        owner = self._owner(channel)
        if not owner:
            await super().send(channel, message)
            return
        data = self.channel_layer.serialize(message)
        if owner == self.process:
            self._put(channel, data)
        else:
            inbox = f"{self.prefix}__process__{owner}"
            await self._get_shard(inbox).publish_now(inbox, msgpack.packb([channel, data]))

    def _put(self, channel: str, data: bytes) -> None:
        queue = self.channels.get(channel)
        if queue is not None:  # else its consumer has left: as with Pub/Sub, nobody hears it
            queue.put_nowait(data)

    # --- groups -------------------------------------------------------------------------
    async def group_add(self, group: str, channel: str) -> None:
        if channel not in self.channels:
            raise RuntimeError("You can only call group_add() on channels that exist in-process.")
        self.members.setdefault(group, set()).add(channel)
        await self._listen()

    async def group_discard(self, group: str, channel: str) -> None:
        members = self.members.get(group)
        if members is not None:
            members.discard(channel)
            if not members:
                del self.members[group]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        data = self.channel_layer.serialize(message)
        self.deliver(group, data)
        self.outbox.append((group, data))
        if self._flush_at is None:
            loop = asyncio.get_running_loop()
            self._flush_at = loop.call_later(self.batch_seconds, self._flush_outbox)

    def deliver(self, group: str, data: bytes) -> None:
        """A group message to this process's members of the group."""
        for channel in self.members.get(group, ()):
            self._put(channel, data)

    def _flush_outbox(self) -> None:
        """One publish on the bus at a time: what comes while one is under way waits for it and
        goes in the next (a loop too busy for the round trips sends fewer, larger batches)."""
        self._flush_at = None
        if self.outbox and not self._publishing:
            task = asyncio.ensure_future(self._publish_outbox())
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    async def _publish_outbox(self) -> None:
        """The outbox on the bus, batch after batch until it is empty. Its tabs elsewhere miss
        a batch if Redis is down: they resync at the next gap they see."""
        while self.outbox:
            batch, self.outbox = self.outbox, []
            try:
                await self._get_shard(self.bus).publish_now(
                    self.bus, msgpack.packb([self.process, batch])
                )
            except Exception:
                log.exception("%d group messages could not go on the bus", len(batch))

    async def _listen(self) -> None:
        """Subscribe, once, to this process's own channel and to the bus."""
        if self._listening:
            return
        self._listening = True
        inbox_shard = self._inbox_shards[_consistent_hash(self.inbox, len(self._inbox_shards))]
        await inbox_shard.subscribe(self.inbox)  # on the Redis its senders publish to
        await self._get_shard(self.bus).subscribe(self.bus)

    async def flush(self) -> None:
        """Send what waits for the bus, then do as channels-redis does: forget every channel
        and group, and close the connections (a loop that closes; a test's fresh start)."""
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        await asyncio.gather(*self._publishing, return_exceptions=True)
        await self._publish_outbox()
        self.members, self._listening = {}, False
        await super().flush()
        for shard in self._inbox_shards:
            await shard.flush()


class BusShard(RedisSingleShardConnection):  # type: ignore[misc]
    """channels-redis's connection to one Redis, reading the bus and the process's channel."""

    channel_layer: BusLoopLayer

    async def publish_now(self, channel: str, data: bytes) -> None:
        """Publish without waiting for the shard's lock (its subscriptions' and channels-redis's
        own publishes): redis-py's pool gives each command a connection of its own, and a
        Cancel must not queue behind a batch on the bus."""
        self._ensure_redis()
        await self._redis.publish(channel, data)

    def _receive_message(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        name = message["channel"]
        name = name.decode() if isinstance(name, bytes) else name
        layer = self.channel_layer
        if name == layer.bus:
            sender, batch = msgpack.unpackb(message["data"])
            if sender != layer.process:  # its own were delivered as they were sent
                for group, data in batch:
                    layer.deliver(group, data)
        elif name == layer.inbox:
            channel, data = msgpack.unpackb(message["data"])
            layer._put(channel, data)
        else:
            super()._receive_message(message)
