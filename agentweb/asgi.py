"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentweb.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentweb.security import SameOriginValidator  # noqa: E402
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
# What is loaded by now lives as long as the process: full collections need not walk it again
# (they otherwise run through every module, model and template at each one, while a page of
# thousands of entries makes the objects that start them).
gc.freeze()
# Young collections every 20,000 new objects, not 700: a burst of prompts makes objects fast,
# and with the default the process spent about 1.1 s of a 200-prompt load collecting (about
# 500 collections, the oldest generation's 60–80 ms each), 0.1–0.2 s with this. The older
# generations keep their default cadence relative to it.
gc.set_threshold(20_000, 10, 10)
