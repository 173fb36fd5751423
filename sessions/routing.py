from __future__ import annotations

from typing import Any

from django.urls import path, re_path

from .consumers import CLOSE_NOT_FOUND, SessionConsumer


async def no_such_socket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Any other WebSocket path (`/ws/sessions/abc/`, `/ws/anything`): closed as not found
    (4404) at its handshake, as a socket for no session of yours is; never a 500."""
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": CLOSE_NOT_FOUND})


websocket_urlpatterns = [
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
    re_path(r"", no_such_socket),
]
