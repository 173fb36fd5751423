"""The WebSocket origin check: a page may open a session's socket only from this very site.

Channels' AllowedHostsOriginValidator compares host names only, so a page served at
`http://localhost:3000` or `https://localhost:9999` could open the socket of a server at
`http://localhost` and read its transcripts. This one compares the Origin's scheme, host
and port with the request's own (its Host header, and ws → http, wss → https), or with an
entry of CSRF_TRUSTED_ORIGINS (for a proxy that terminates TLS).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an origin such as `https://chat.example.com:8443`."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin a page of this server has, from the socket request's Host header."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return scheme, domain, int(port) if port else DEFAULT_PORTS[scheme]


def trusted(origin: Origin) -> bool:
    """An entry of CSRF_TRUSTED_ORIGINS names it (`https://*.example.com` allows subdomains)."""
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        wanted = parse_origin(entry.replace("://*.", "://wildcard."))
        if wanted is None or wanted[0] != scheme or wanted[2] != port:
            continue
        if "://*." in entry:
            suffix = wanted[1].removeprefix("wildcard")
            if host.endswith(suffix):
                return True
        elif wanted[1] == host:
            return True
    return False


def allowed(scope: dict[str, Any]) -> bool:
    origin = parse_origin(_header(scope, b"origin"))
    if origin is None:
        return False
    return origin == own_origin(scope) or trusted(origin)


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""


class SameOriginValidator:
    """ASGI middleware: refuse a WebSocket whose Origin is not this site's."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
