"""A socket whose session was deleted for good under it (a purge, another tab's delete of a
chain) closes with 4404 when a handler finds it gone, instead of failing inside the server
(where daphne logs "Exception inside application")."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from sessions.consuming import LeanConsumer
from sessions.models import ChatSession


class ReadsItsSession(LeanConsumer):
    """A consumer whose layer handler reads a session that is no longer there."""

    groups = ["reads-its-session"]

    async def session_read(self, event: dict[str, object]) -> None:
        await ChatSession.objects.aget(pk=event["session"])


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_handler_that_finds_its_session_gone_closes_the_socket_with_4404():
    socket = WebsocketCommunicator(ReadsItsSession.as_asgi(), "/ws/")
    connected, _ = await socket.connect()
    assert connected
    await get_channel_layer().group_send(
        "reads-its-session", {"type": "session.read", "session": 404_404}
    )
    closed = await socket.receive_output(5)
    assert closed == {"type": "websocket.close", "code": 4404}
    await socket.wait(5)  # the application ended, nothing raised
