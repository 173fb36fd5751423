"""Whether the sign-in a WebSocket was opened with still holds, by Django's own rules: its
session exists and has not expired, and it was made with the user's current password (a
password change ends every other sign-in, as Django's session verification does for pages).

Every frame a socket sends is checked. Django's check reads the session's row and the user's
(two ORM reads, about 0.6 ms); here one compiled statement reads what the verdict depends on
(the session's data, unexpired; the user's password and active flag), and when that is what
it was the last time Django's own check held for this sign-in, the verdict is the same. Any
change (a new password, a sign-out, expiry, the session's data rewritten) and every verdict
that does not hold go through Django's check itself. The same statement reads the rest of a
frame's check, the chat session's generation channel (`holds_beside`).

A prompt need not read first: once the sign-in has held, the statement that claims its session
can require the sign-in's state to be what it was then (`held`, `unchanged`), and the check
itself runs only when that claim is not taken (`sessions.generation.turns.queue_prompt`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db.models import BooleanField, Exists, Q, QuerySet, Subquery
from django.utils import timezone

from . import store
from .statements import Statement

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
    _standing,
    columns={"active": BooleanField()},
    key=str,
    user_id=int,
    now=datetime,
    chat_session_id=int,
)
_held: dict[tuple[str, int], tuple[object, ...]] = {}  # a sign-in → its state when it last held


@dataclass(frozen=True)
class Held:
    """A sign-in as it was the last time Django's check held for it."""

    key: str
    user_id: int
    data: str  # its session's data
    password: str  # its user's password hash


def end_others(user_id: int, keep: str) -> list[str]:
    """Every unexpired sign-in of the user but `keep` ended (its session's row deleted): their
    keys. Reads each session as Django decodes it (`Session.get_decoded`)."""
    ended = [
        session.session_key
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if session.session_key != keep
        and str(session.get_decoded().get(auth.SESSION_KEY)) == str(user_id)
    ]
    Session.objects.filter(session_key__in=ended).delete()
    return ended


def held(session_key: str, user_id: int) -> Held | None:
    """Sign-in `session_key` of user `user_id` as it last held, if it did (no database call);
    None when it has not held yet in this process, or sign-ins are not kept in the database."""
    state = _held.get((session_key, user_id))
    if state is None or settings.SESSION_ENGINE != DATABASE_SESSIONS:
        return None
    data, password, active = state
    if not (active and isinstance(data, str) and isinstance(password, str)):
        return None
    return Held(session_key, user_id, data, password)


def unchanged(key: str, user_id: int, data: str, password: str, now: datetime) -> Q:
    """A condition on any row: sign-in `key` is unexpired at `now` with session data `data`, and
    its user is active with password hash `password`. When these are a `Held`'s, it holds
    exactly when `holds` would say so without asking Django again."""
    sign_in = Session.objects.filter(session_key=key, expire_date__gt=now, session_data=data)
    user = get_user_model().objects.filter(pk=user_id, password=password, is_active=True)
    return Q(Exists(sign_in), Exists(user))


def holds(session_key: str, user_id: int) -> bool:
    """Whether sign-in `session_key` is still user `user_id`'s."""
    return holds_beside(session_key, user_id, 0)[0]


def holds_beside(session_key: str, user_id: int, chat_session_id: int) -> tuple[bool, str | None]:
    """Whether sign-in `session_key` is still user `user_id`'s; and, read by the same statement,
    the channel of chat session `chat_session_id`'s generation ("" when none runs; None when
    the session is not kept, or the sign-in does not hold): a frame's whole check."""
    if not session_key:
        return False, None
    if settings.SESSION_ENGINE != DATABASE_SESSIONS:
        return _by_django(session_key, user_id), store.kept_generation(chat_session_id)
    state, channel = _state(session_key, user_id, chat_session_id)
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
    found = STANDING.first(
        key=session_key, user_id=user_id, now=timezone.now(), chat_session_id=chat_session_id
    )
    if found is None or found[1] is None:
        return None, None
    return found[:3], found[3]


def _by_django(session_key: str, user_id: int) -> bool:
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))
    user = auth.get_user(request)  # type: ignore[arg-type]  # it reads only `session`
    return bool(user.is_authenticated and user.pk == user_id)
