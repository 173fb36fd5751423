"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentweb.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from foundation.interpreter import settle  # noqa: E402
from foundation.security import SameOriginValidator  # noqa: E402
from sessions.providers import warm_up  # noqa: E402
from sessions.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

warm_up()  # the SDK's import costs about a second: pay it at start-up, not at the first prompt
get_channel_layer()  # likewise the layer's (redis-py's, with REDIS_URL), before the first socket
settle()  # the interpreter as a long-running server wants it (foundation/interpreter.py)
