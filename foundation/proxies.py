"""The address a request came from, behind the reverse proxies the README's set-up puts in front
(AGENTWEB_TRUSTED_PROXIES of them): what sign-in throttling counts failures by.

Each trusted proxy appends the address it was reached from to X-Forwarded-For, so the client's
address is the entry the first of them appended: the N-th from the right. Entries left of it
are whatever the client wrote, and are never trusted. Without trusted proxies, or when the
header is shorter than their number (a request that did not come through them all), it is
the address of the connection itself.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    proxies = settings.AGENTWEB_TRUSTED_PROXIES
    forwarded = [entry.strip() for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [entry for entry in forwarded if entry]
    if proxies and len(forwarded) >= proxies:
        return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR")
