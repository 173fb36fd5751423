"""Whether the sign-in a WebSocket was opened with still holds, by Django's own rules: its
session exists and has not expired, and it was made with the user's current password (a
password change ends every other sign-in, as Django's session verification does for pages).

Every frame a socket sends is checked. Django's check reads the session's row and the user's
(two ORM reads, about 0.6 ms); here one compiled statement reads what the verdict depends on
(the session's data, unexpired; the user's password and active flag), and when that is what
it was the last time Django's own check held for this sign-in, the verdict is the same. Any
change (a new password, a sign-out, expiry, the session's data rewritten) and every verdict
that does not hold go through Django's check itself. The same statement reads the rest of a
frame's check, the chat session's generation channel (`holds_beside`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import Exists, Q, QuerySet, Subquery
from django.utils import timezone

from . import store
from .statements import Rows, Statement

DATABASE_SESSIONS = "django.contrib.sessions.backends.db"
REMEMBERED = 10_000  # sign-ins whose last holding state is kept; more and it starts again


def _standing(
    key: str, user_id: int, now: datetime, chat_session_id: int
) -> QuerySet[Session, tuple[object, ...]]:
    users = get_user_model().objects.filter(pk=user_id)
    return (
        Session.objects.filter(session_key=key, expire_date__gt=now)
        .annotate(
            password=Subquery(users.values("password")[:1]),
            active=Subquery(users.values("is_active")[:1]),
            channel=Subquery(store.KEPT.build(session_id=chat_session_id)),
        )
        .values_list("session_data", "password", "active", "channel")[:1]
    )


STANDING: Statement[Session] = Statement(
    _standing, key=str, user_id=int, now=datetime, chat_session_id=int
)
_held: dict[tuple[str, int], tuple[object, ...]] = {}  # a sign-in → its state when it last held


class Standing:
    """A socket's standing as its frames' checks last read it: whether its sign-in
    (`session_key`, of user `user_id`) holds, and the channel of chat session
    `chat_session_id`'s generation ("" when none runs; None when the session is not kept)."""

    def __init__(self, session_key: str, user_id: int, chat_session_id: int) -> None:
        self.session_key, self.user_id, self.chat_session_id = session_key, user_id, chat_session_id
        self.signed_in: bool = True
        self.channel: str | None = ""

    @property
    def holds(self) -> bool:
        """The frame may be acted on: signed in, and the session kept."""
        return self.signed_in and self.channel is not None

    def check(self) -> bool:
        """A frame's check (a database call's statement): whether it holds now."""
        return self.sending()()

    def sending(self) -> Callable[[], bool]:
        """The check sent (within `sent_together`, with the others), and what reads whether it
        holds (after it)."""
        heard = sending_beside(self.session_key, self.user_id, self.chat_session_id)

        def holds() -> bool:
            self.signed_in, self.channel = heard()
            return self.holds

        return holds

    def as_held(self) -> dict[str, Any] | None:
        """`as_held` of this sign-in: what a statement can stand on in place of the check."""
        return as_held(self.session_key, self.user_id)


def holds(session_key: str, user_id: int) -> bool:
    """Whether sign-in `session_key` is still user `user_id`'s."""
    return holds_beside(session_key, user_id, 0)[0]


def holds_beside(session_key: str, user_id: int, chat_session_id: int) -> tuple[bool, str | None]:
    """Whether sign-in `session_key` is still user `user_id`'s; and, read by the same statement,
    the channel of chat session `chat_session_id`'s generation ("" when none runs; None when
    the session is not kept, or the sign-in does not hold): a frame's whole check."""
    return sending_beside(session_key, user_id, chat_session_id)()


def sending_beside(
    session_key: str, user_id: int, chat_session_id: int
) -> Callable[[], tuple[bool, str | None]]:
    """`holds_beside`, its statement sent (within `sent_together`, with the others), and what
    gives its verdict (after it)."""
    if not session_key:
        return lambda: (False, None)
    if settings.SESSION_ENGINE != DATABASE_SESSIONS:
        standing = _by_django(session_key, user_id), store.kept_generation(chat_session_id)
        return lambda: standing
    found = STANDING.send(
        key=session_key, user_id=user_id, now=timezone.now(), chat_session_id=chat_session_id
    )
    return lambda: _verdict(session_key, user_id, found())


def _verdict(session_key: str, user_id: int, found: Rows) -> tuple[bool, str | None]:
    state, channel = _state_of(found)
    if state is None:  # no such sign-in now (signed out, expired), or no such user
        return False, None
    sign_in = (session_key, user_id)
    if _held.get(sign_in) == state:
        return True, channel
    held = _by_django(session_key, user_id)
    if held and _state(session_key, user_id, 0)[0] == state:  # Django judged this very state
        if len(_held) >= REMEMBERED:
            _held.clear()
        _held[sign_in] = state
    return held, channel


def _state(
    session_key: str, user_id: int, chat_session_id: int
) -> tuple[tuple[object, ...] | None, str | None]:
    """What the verdict depends on (None: no such sign-in or user), and the chat session's
    channel."""
    return _state_of(
        STANDING.rows(
            key=session_key, user_id=user_id, now=timezone.now(), chat_session_id=chat_session_id
        )
    )


def _state_of(found: Rows) -> tuple[tuple[object, ...] | None, str | None]:
    if not found or found[0][1] is None:
        return None, None
    return found[0][:3], found[0][3]


def as_held(session_key: str, user_id: int) -> dict[str, Any] | None:
    """The sign-in's state when Django's check last held for it, as `still_held` takes it; None
    when this process has not judged it (or it is not kept in the database)."""
    if settings.SESSION_ENGINE != DATABASE_SESSIONS:
        return None
    state = _held.get((session_key, user_id))
    if state is None or state[2] is not True:
        return None
    data, password, _ = state
    return {"key": session_key, "user_id": user_id, "data": data, "password": password}


AS_HELD = {"key": str, "user_id": int, "data": str, "password": str}  # `as_held`'s values


def still_held(held: dict[str, Any]) -> Q:
    """Where the sign-in is as `as_held` gave it (`held`, and `held["now"]`): unexpired, its data
    and its user's password the same, the user active. Django's check held for that state, so
    a statement can stand on it: a prompt's claim, sent with the frame's check, takes the
    session only if the check holds."""
    sign_in = Session.objects.filter(
        session_key=held["key"], expire_date__gt=held["now"], session_data=held["data"]
    )
    user = get_user_model().objects.filter(
        pk=held["user_id"], password=held["password"], is_active=True
    )
    return Q(Exists(sign_in)) & Q(Exists(user))


def _by_django(session_key: str, user_id: int) -> bool:
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))
    user = auth.get_user(request)  # type: ignore[arg-type]  # it reads only `session`
    return bool(user.is_authenticated and user.pk == user_id)
