"""A socket's consumer takes the browser's frames and the channel layer's events one at a time,
each source's in order, and stops at the first error, as Channels' own dispatch does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.exceptions import StopConsumer

from sessions.consuming import _past_the_session_wrapper, dispatch_from

pytestmark = pytest.mark.asyncio


def source(queue: asyncio.Queue[dict[str, Any]]) -> Any:
    return queue.get


async def filled(*texts: str) -> asyncio.Queue[dict[str, Any]]:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for text in texts:
        queue.put_nowait({"type": "x", "text": text})
    return queue


async def test_each_sources_messages_are_handled_in_order_and_never_two_at_once():
    frames = await filled("f1", "f2", "f3")
    events = await filled("e1", "e2", "e3")
    handled: list[str] = []
    handling = 0

    async def dispatch(message: dict[str, Any]) -> None:
        nonlocal handling
        handling += 1
        assert handling == 1, "a handler ran beside another"
        await asyncio.sleep(0.001)  # a handler that awaits: the other source must wait for it
        handled.append(message["text"])
        handling -= 1
        if len(handled) == 6:
            raise StopConsumer

    with pytest.raises(StopConsumer):
        await dispatch_from([source(frames), source(events)], dispatch)
    assert [text for text in handled if text[0] == "f"] == ["f1", "f2", "f3"]
    assert [text for text in handled if text[0] == "e"] == ["e1", "e2", "e3"]


async def test_an_error_in_a_handler_ends_both_readers_and_is_raised():
    frames = await filled("boom")
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()  # never gets a message
    waiting = asyncio.get_running_loop().create_future()

    async def receive_event() -> dict[str, Any]:
        waiting.set_result(True)
        return await events.get()

    async def dispatch(message: dict[str, Any]) -> None:
        await waiting  # the other reader is waiting for its source by now
        raise ValueError(f"No handler for message type {message['type']}")

    with pytest.raises(ValueError, match="No handler for message type x"):
        await asyncio.wait_for(dispatch_from([source(frames), receive_event], dispatch), 2)
    events.put_nowait({"type": "late"})
    await asyncio.sleep(0.01)
    assert events.qsize() == 1  # the event reader was stopped: nothing took it


async def test_a_sockets_frames_go_to_the_server_past_the_session_middlewares_wrapper():
    from channels.sessions import InstanceSessionWrapper

    sent: list[dict[str, Any]] = []

    async def server_send(message: dict[str, Any]) -> None:
        sent.append(message)

    wrapper = InstanceSessionWrapper({"type": "websocket", "cookies": {}}, server_send)
    send = _past_the_session_wrapper(wrapper.send)
    await send({"type": "websocket.send", "text": "<p>hi</p>"})
    assert send is server_send and sent == [{"type": "websocket.send", "text": "<p>hi</p>"}]
    assert _past_the_session_wrapper(server_send) is server_send  # no wrapper: as it is
