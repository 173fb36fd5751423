"""How a socket's consumer takes its messages: the browser's frames and the channel layer's
events, one at a time, as Channels does, for less of the event loop.

Channels' `await_many_dispatch` starts a task for each message it waits for and an
`asyncio.wait` over both sources for each message it gets: with 200 tabs streaming (thousands
of relayed batches a second) that machinery was a sixth of a busy loop (docs/PERFORMANCE.md).
Here each source is read by one task for the socket's life, and a lock lets one message be
handled at a time: each source's messages in order, a handler never beside another, and the
first error (Channels' `StopConsumer` among them) ends both.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from autobahn.exception import Disconnected
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.sessions import InstanceSessionWrapper
from django.core.exceptions import ObjectDoesNotExist

Message = dict[str, Any]
log = logging.getLogger(__name__)
GONE = 4404  # the close code of a socket whose session was deleted for good under it


async def dispatch_from(
    sources: Sequence[Callable[[], Awaitable[Message]]],
    dispatch: Callable[[Message], Awaitable[None]],
) -> None:
    """Each message of each source to `dispatch`, one at a time, until one raises (that
    exception is raised here, once both readers have stopped)."""
    turn = asyncio.Lock()

    async def read(receive: Callable[[], Awaitable[Message]]) -> None:
        while True:
            message = await receive()
            async with turn:
                await dispatch(message)

    readers = [asyncio.ensure_future(read(receive)) for receive in sources]
    try:
        done, _ = await asyncio.wait(readers, return_when=asyncio.FIRST_EXCEPTION)
        for reader in done:
            reader.result()
    finally:
        for reader in readers:
            reader.cancel()
        for reader in readers:
            with contextlib.suppress(asyncio.CancelledError):
                await reader


class LeanConsumer(AsyncWebsocketConsumer):
    """Channels' WebSocket consumer, its messages taken by `dispatch_from`."""

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.base_send = _quiet_once_closed(_past_the_session_wrapper(send))
        sources = [receive]
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
            sources.append(self.channel_receive)
        with contextlib.suppress(StopConsumer):  # the consumer's own end
            try:
                await dispatch_from(sources, self.dispatch)
            except ObjectDoesNotExist:  # what the socket shows was deleted for good meanwhile
                log.info("a socket closes: what it showed is gone")
                await self.close(code=GONE)
                await self.websocket_disconnect({"type": "websocket.disconnect", "code": GONE})


# What a server raises for a message sent to a socket the browser has just closed: the ASGI
# spec's `OSError`, and daphne's (autobahn's `Disconnected`).
CLOSED = (OSError, Disconnected)


def _quiet_once_closed(send: Any) -> Any:
    """`send`, which drops a message for a socket the browser has closed: a tab closed during
    a burst of deltas is a normal end, and its disconnect is on its way to the consumer."""

    async def sending(message: Message) -> None:
        try:
            await send(message)
        except CLOSED:
            log.debug("a %s for a socket the browser closed, dropped", message.get("type"))

    return sending


def _past_the_session_wrapper(send: Any) -> Any:
    """The server's own send, when `send` is Channels' session middleware's wrapper of it: the
    wrapper saves the session on an HTTP response's start and otherwise passes each message
    through, reading the (lazy) session's state first, which a socket pays for every frame it
    is sent. A WebSocket sends no HTTP response."""
    wrapper = getattr(send, "__self__", None)
    if not isinstance(wrapper, InstanceSessionWrapper):
        return send
    acts_on = [*wrapper.save_message_types, *wrapper.cookie_response_message_types]
    if any(kind.startswith("websocket.") for kind in acts_on):  # a Channels that does, one day
        return send
    return wrapper.real_send
