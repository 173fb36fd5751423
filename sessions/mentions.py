"""Mentions (issue 19, item 4): `@#42` in a message names another session of the user's. The
prompt carries a one-line pointer to it (not its transcript), and `recall` can look things up
in it. Sessions the user does not own are refused."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db.models import JSONField, QuerySet, Value

from .context import mentions_in
from .models import ChatSession, Entry, Refused
from .statements import Statement
from .tallies import Tally, with_the_newest

MENTION = re.compile(r"(?<![\w@#])@#([0-9]{1,18})\b")
MENU_SESSIONS = 30  # the most recent sessions the @ menu offers


def ids_in(text: str) -> list[int]:
    """The sessions `text` mentions, in order, each once."""
    return list(dict.fromkeys(int(number) for number in MENTION.findall(text)))


def checked(session: ChatSession, text: str) -> dict[str, Any]:
    """What a user message keeps of its mentions (`data_of`), in one read; `Refused` when it
    names a session that is not one of the owner's."""
    named = ids_in(text)
    found = _own(session, named)
    foreign = [number for number in named if number not in found and number != session.pk]
    if foreign:
        raise Refused(f"You can mention only your own sessions: #{foreign[0]} is not one of them.")
    return _kept(session, named, found)


def data_of(session: ChatSession, text: str) -> dict[str, Any]:
    """What a user message keeps of its mentions: each session's id and title (the page shows
    the title; the context, a pointer). A session that is not the owner's is left out."""
    named = ids_in(text)
    return _kept(session, named, _own(session, named))


def _own(session: ChatSession, named: list[int]) -> dict[int, ChatSession]:
    """The sessions of `named` that are the owner's and kept, other than `session`: one read,
    none when there are none."""
    others = [number for number in named if number != session.pk]
    if not others:
        return {}
    return ChatSession.objects.filter(ChatSession.kept(), owner_id=session.owner_id).in_bulk(others)


def _kept(session: ChatSession, named: list[int], found: dict[int, ChatSession]) -> dict[str, Any]:
    kept = [
        {"session": number, "title": found[number].display_title}
        for number in named
        if number in found
    ]
    return {"mentions": kept} if kept else {}


def mentioned_by(session: ChatSession) -> list[int]:
    """The sessions this one's messages mention (recall reads them as well as the lineage): read
    at every prompt (is recall offered?), kept by the process and brought up to date from the
    messages written since (`sessions.tallies`), not read from every entry of a long session."""
    return list(MENTIONED.of(session))


def _named(before: tuple[int, ...], rows: Sequence[tuple[int, Any]]) -> tuple[int, ...]:
    said = sorted((pk, data) for pk, data in rows if data is not None)  # in order of writing
    named = (number for _, data in said for number, _ in mentions_in(data))
    return tuple(dict.fromkeys([*before, *named]))


def _mentioning(session_id: int, after: int) -> QuerySet[Entry, Any]:
    """The messages after `after` that mention sessions (id, data), and the newest entry (id,
    None). Only a person's own message names a mention (agentweb keeps what they typed): an
    imported line's `details` may say anything, and must not widen what recall reads."""
    new = Entry.objects.filter(session_id=session_id, pk__gt=after)
    own = new.filter(kind=Entry.Kind.MESSAGE, role=Entry.Role.USER)
    mentioning = own.filter(data__mentions__isnull=False).values_list("pk", "data")
    return with_the_newest(new, mentioning, Value(None, JSONField()))


MENTIONING: Statement[Entry] = Statement(_mentioning, session_id=int, after=int)
MENTIONED: Tally[tuple[int, Any], tuple[int, ...]] = Tally(
    MENTIONING,
    last=lambda row: row[0],
    fold=_named,
    empty=(),
)


def menu(owner: User, session: ChatSession) -> list[ChatSession]:
    """The sessions the @ menu offers: the owner's, most recent first, this one left out."""
    return list(
        ChatSession.objects.filter(ChatSession.kept(), owner=owner)
        .exclude(pk=session.pk)
        .order_by("-updated_at")[:MENU_SESSIONS]
    )
