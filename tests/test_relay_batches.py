"""The relay's batches of streamed text: each goes out when the batch interval ends, in
sequence with every other event of its generation, on agentweb's layers (which take a batch in
the step that makes it) and on any other layer (through a task)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from sessions import tabs
from sessions.generation.relay import Relay
from sessions.partials.events import render

pytestmark = pytest.mark.asyncio

SESSION = 7
generations = itertools.count()


async def a_relay_and_its_tab() -> tuple[Relay, str]:
    relay = Relay(f"gen{next(generations)}", lambda: SESSION, render, lambda: 1)
    tab = await relay.layer.new_channel()
    await relay.layer.group_add(tabs.session_group(SESSION), tab)
    return relay, tab


async def read(relay: Relay, tab: str) -> dict:
    return await asyncio.wait_for(relay.layer.receive(tab), 2)


async def test_a_replys_text_reaches_the_tab_in_numbered_batches():
    relay, tab = await a_relay_and_its_tab()
    relay.on_delta("Hello")  # a reply's first text goes at once
    first = await read(relay, tab)
    for word in (" brave", " new", " world"):  # within one batch interval
        relay.on_delta(word)
    second = await read(relay, tab)
    assert (first["seq"], second["seq"]) == (1, 2)
    assert "Hello" in first["html"]
    assert "brave new world" in second["html"]


async def test_a_batch_that_falls_due_while_a_snapshot_is_taken_follows_the_snapshot(settings):
    settings.AGENTWEB_DELTA_BATCH_SECONDS = 0.01
    relay, tab = await a_relay_and_its_tab()
    relay.on_delta("Hello")
    await read(relay, tab)
    relay.on_delta(" world")
    async with relay.holding():  # as the job holds it to answer a tab's snapshot request
        snapshot = relay.snapshot(replying=True, purpose="", stage="")
        await asyncio.sleep(0.1)  # ten batch intervals
        arrived = relay.layer.channels.get(tab)
        assert arrived is None or arrived.empty()  # nothing numbered past the snapshot yet
    after = await read(relay, tab)
    assert snapshot["seq"] == 1 and "Hello" in snapshot["html"] and "world" not in snapshot["html"]
    assert after["seq"] == 2 and "world" in after["html"]


async def test_on_a_layer_that_makes_a_sender_wait_batches_still_go_in_order(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.AGENTWEB_DELTA_BATCH_SECONDS = 0.01
    relay, tab = await a_relay_and_its_tab()
    assert not hasattr(relay.layer, "group_send_now")  # Channels' own layer
    relay.on_delta("one")
    got = [await read(relay, tab)]
    for word in (" two", " three"):
        relay.on_delta(word)
        await asyncio.sleep(0.03)
        got.append(await read(relay, tab))
    assert [message["seq"] for message in got] == [1, 2, 3]
    assert ["one" in got[0]["html"], "two" in got[1]["html"], "three" in got[2]["html"]] == [
        True,
        True,
        True,
    ]
