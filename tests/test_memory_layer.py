"""The in-memory channel layer of one process: a channel's messages arrive in order, a group's
reach every member, and a channel holds a queue only while it has messages or a receiver."""

from __future__ import annotations

import asyncio

import pytest

from agentweb.layers.memory import InMemoryChannelLayer

pytestmark = pytest.mark.asyncio


async def test_a_channels_messages_arrive_in_the_order_they_were_sent():
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    for number in range(3):
        await layer.send(channel, {"type": "agent.event", "seq": number})
    assert [(await layer.receive(channel))["seq"] for _ in range(3)] == [0, 1, 2]


async def test_a_receive_that_comes_first_gets_the_next_group_message_and_leaves_no_queue():
    layer = InMemoryChannelLayer()
    tabs = [await layer.new_channel() for _ in range(2)]
    for tab in tabs:
        await layer.group_add("session-7", tab)
    waiting = asyncio.ensure_future(layer.receive(tabs[0]))
    await asyncio.sleep(0)  # the receive waits on its channel's queue
    await layer.group_send("session-7", {"type": "agent.event", "html": "<p>hi</p>"})
    assert (await asyncio.wait_for(waiting, 1))["html"] == "<p>hi</p>"
    assert (await layer.receive(tabs[1]))["html"] == "<p>hi</p>"
    assert layer.channels == {}  # emptied: no queue is kept for either tab
