from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path, re_path

from .consumers import CLOSE_NOT_FOUND, SessionConsumer


class NoSuchSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path (`/ws/sessions/abc/`, `/ws/anything`): closed as not found
    (4404) at its handshake, as a socket for no session of yours is; never a 500."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_NOT_FOUND)


websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
    re_path(r"", NoSuchSocket.as_asgi()),
]
