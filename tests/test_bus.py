"""The bus (foundation/layers/bus.py): the Redis channel layer of several processes. Each layer
here stands for one process, against a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import msgpack
import pytest
import pytest_asyncio
import redis as redis_py
from asgiref.sync import async_to_sync
from redis import asyncio as aioredis

from foundation.layers.bus import BusChannelLayer

from .servers import RedisServer


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest_asyncio.fixture
async def processes(redis: RedisServer) -> AsyncIterator[list[BusChannelLayer]]:
    """Two processes' layers on one Redis."""
    layers = [BusChannelLayer(hosts=[redis.url], capacity=100_000) for _ in range(2)]
    yield layers
    for layer in layers:
        await layer.flush()


async def received(layer: BusChannelLayer, channel: str, count: int = 1) -> list[int]:
    async with asyncio.timeout(5):
        return [(await layer.receive(channel))["n"] for _ in range(count)]


@pytest.mark.asyncio
async def test_a_group_message_reaches_its_members_here_and_in_another_process(processes):
    here, there = processes
    mine, theirs = await here.new_channel(), await there.new_channel()
    await here.group_add("session.7", mine)
    await there.group_add("session.7", theirs)
    await here.group_send("session.7", {"type": "agent.event", "n": 1})
    assert await received(here, mine) == [1]
    assert await received(there, theirs) == [1]


@pytest.mark.asyncio
async def test_group_messages_reach_another_process_whole_and_in_order(processes):
    here, there = processes
    theirs = await there.new_channel()
    await there.group_add("session.7", theirs)
    for n in range(500):
        await here.group_send("session.7", {"type": "agent.event", "n": n})
    assert await received(there, theirs, 500) == list(range(500))


@pytest.mark.asyncio
async def test_a_message_goes_to_a_channel_of_this_process_or_of_another(processes):
    here, there = processes
    mine, theirs = await here.new_channel(), await there.new_channel()
    await here.send(theirs, {"type": "generation.cancel", "n": 1})
    await here.send(mine, {"type": "generation.cancel", "n": 2})
    assert await received(there, theirs) == [1]
    assert await received(here, mine) == [2]


@pytest.mark.asyncio
async def test_a_member_that_left_its_group_hears_nothing_more(processes):
    here, there = processes
    theirs = await there.new_channel()
    await there.group_add("session.7", theirs)
    await there.group_discard("session.7", theirs)
    await here.group_send("session.7", {"type": "agent.event", "n": 1})
    await here.send(theirs, {"type": "agent.event", "n": 2})
    assert await received(there, theirs) == [2]  # the group's message never came


@pytest.mark.asyncio
async def test_a_process_subscribes_to_two_redis_channels_whatever_its_sockets(redis, processes):
    here, _ = processes
    for n in range(50):
        await here.group_add(f"session.{n}", await here.new_channel())
    client = aioredis.Redis.from_url(redis.url)
    try:
        subscribed = await client.pubsub_channels()
    finally:
        await client.aclose()
    assert len(subscribed) == 2  # the bus, and the process's own channel


@pytest.mark.asyncio
async def test_a_cancel_is_read_before_the_bus_batches_that_came_ahead_of_it(redis, processes):
    """Under load a process's bus connection has other processes' batches waiting to be read:
    a message to one of its channels (a Cancel) is read at once, not after them."""
    here, there = processes
    tab, job = await there.new_channel(), await there.new_channel()
    await there.group_add("session.7", tab)
    event = {"type": "agent.event", "text": "a token " * 10}
    batch = msgpack.packb(["another process", [("session.7", event)] * 50])
    cancel = msgpack.packb([job, {"type": "generation.cancel"}])
    client = redis_py.Redis.from_url(redis.url)  # blocking: the loop reads nothing meanwhile
    try:
        for _ in range(400):
            client.publish(there.bus, batch)
        client.publish(there.inbox, cancel)
    finally:
        client.close()
    async with asyncio.timeout(10):
        assert (await there.receive(job))["type"] == "generation.cancel"
    assert len(there.channels[tab].messages) < 400 * 50  # the bus's batches were still being read
    async with asyncio.timeout(10):
        while len(there.channels[tab].messages) < 400 * 50:
            await asyncio.sleep(0.01)  # and every one of them came


def test_a_group_message_sent_from_synchronous_code_reaches_another_process(redis):
    """A view's `async_to_sync` runs the send on a loop of its own, closed right after: what
    waited for the bus goes before it closes."""
    there = BusChannelLayer(hosts=[redis.url])
    here = BusChannelLayer(hosts=[redis.url])

    async def listen() -> list[int]:
        theirs = await there.new_channel()
        await there.group_add("session.7", theirs)
        async_to_sync_in_thread = asyncio.to_thread(
            async_to_sync(here.group_send), "session.7", {"type": "session.update", "n": 3}
        )
        await async_to_sync_in_thread
        try:
            return await received(there, theirs)
        finally:
            await there.flush()

    assert asyncio.run(listen()) == [3]
