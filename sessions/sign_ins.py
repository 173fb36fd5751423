"""Whether the sign-in a WebSocket was opened with still holds, by Django's own rules: its
session exists and has not expired, and it was made with the user's current password (a
password change ends every other sign-in, as Django's session verification does for pages)."""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth


def holds(session_key: str, user_id: int) -> bool:
    """Whether sign-in `session_key` is still user `user_id`'s."""
    if not session_key:
        return False
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))
    user = auth.get_user(request)  # type: ignore[arg-type]  # it reads only `session`
    return bool(user.is_authenticated and user.pk == user_id)
