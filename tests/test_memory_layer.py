"""The in-memory channel layer of one process: a channel's messages arrive in order, a group's
reach every member, and a channel holds a queue only while it has messages or a receiver."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull

from foundation.layers.memory import MemoryChannelLayer

pytestmark = pytest.mark.asyncio


async def test_a_channels_messages_arrive_in_the_order_they_were_sent():
    layer = MemoryChannelLayer()
    channel = await layer.new_channel()
    for number in range(3):
        await layer.send(channel, {"type": "agent.event", "seq": number})
    assert [(await layer.receive(channel))["seq"] for _ in range(3)] == [0, 1, 2]


async def test_a_receive_that_comes_first_gets_the_next_group_message_and_leaves_no_queue():
    layer = MemoryChannelLayer()
    tabs = [await layer.new_channel() for _ in range(2)]
    for tab in tabs:
        await layer.group_add("session-7", tab)
    waiting = asyncio.ensure_future(layer.receive(tabs[0]))
    await asyncio.sleep(0)  # the receive waits on its channel's queue
    await layer.group_send("session-7", {"type": "agent.event", "html": "<p>hi</p>"})
    assert (await asyncio.wait_for(waiting, 1))["html"] == "<p>hi</p>"
    assert (await layer.receive(tabs[1]))["html"] == "<p>hi</p>"
    assert layer.channels == {}  # emptied: no queue is kept for either tab


async def test_a_full_channel_refuses_a_message_and_a_group_member_that_is_full_misses_it():
    layer = MemoryChannelLayer(capacity=2)
    tab = await layer.new_channel()
    await layer.group_add("session-7", tab)
    for number in range(2):
        await layer.send(tab, {"type": "agent.event", "seq": number})
    with pytest.raises(ChannelFull):
        await layer.send(tab, {"type": "agent.event", "seq": 2})
    await layer.group_send("session-7", {"type": "agent.event", "seq": 3})  # skipped, no error
    assert [(await layer.receive(tab))["seq"] for _ in range(2)] == [0, 1]


async def test_a_message_that_expires_unread_is_dropped_and_its_channel_leaves_its_groups():
    layer = MemoryChannelLayer(expiry=0)
    gone, alive = await layer.new_channel(), await layer.new_channel()
    for tab in (gone, alive):
        await layer.group_add("session-7", tab)
    await layer.send(gone, {"type": "agent.event", "seq": 0})  # expires at once
    layer.expiry = 60
    layer.swept_at = 0.0  # the next put sweeps (at most once a second)
    waiting = asyncio.ensure_future(layer.receive(alive))
    await asyncio.sleep(0)
    await layer.group_send("session-7", {"type": "agent.event", "seq": 1})
    assert (await asyncio.wait_for(waiting, 1))["seq"] == 1
    assert gone not in layer.groups["session-7"]  # its consumer never read: it is gone
    assert gone not in layer.channels


async def test_a_cancelled_receive_leaves_no_queue_and_the_next_one_gets_the_message():
    layer = MemoryChannelLayer()
    tab = await layer.new_channel()
    waiting = asyncio.ensure_future(layer.receive(tab))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert layer.channels == {}
    await layer.send(tab, {"type": "agent.event", "seq": 5})
    assert (await layer.receive(tab))["seq"] == 5
