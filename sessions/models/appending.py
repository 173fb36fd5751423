"""The statements every append runs, for every message of every prompt (issue 21): the
session's leaf read under a lock, the entry's row, the session's row written after it, and
the title a first message gives, each compiled once (`sessions.statements`). On PostgreSQL the
first three are one statement (`_entry_sent`): a round trip there is 0.5–1 ms, and the three in a
transaction were five of them. The session model is looked up by name: it imports this
module."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from ..content import text_of, title_from
from ..statements import Insert, Statement, Update
from .entry import Entry


def _sessions() -> QuerySet[Any, Any]:
    return apps.get_model("chat", "ChatSession").objects.all()


ENTRY = Insert(Entry)  # an entry's row, as `save(force_insert=True)` writes it

LEAF = Statement(
    lambda session_id: _sessions().select_for_update().filter(pk=session_id).values_list("leaf_id"),
    session_id=int,
)


def _appended(context: Any) -> Update[Any]:
    """The session row after an entry joined it: the entry is its leaf, its context `context`."""
    return Update(
        lambda session_id, leaf_id, now, tokens: (
            _sessions().filter(pk=session_id),
            {
                "leaf_id": leaf_id,
                "updated_at": now,
                "partial_text": "",
                "context_tokens": context(tokens),
            },
        ),
        session_id=int,
        leaf_id=int,
        now=datetime,
        tokens=int,
    )


REPORTED = _appended(lambda tokens: tokens)  # a reply's usage says the context's size
ADDED = _appended(lambda tokens: F("context_tokens") + tokens)  # anything else adds its estimate

TITLED = Update(  # a session's first message titles it, unless it has a title
    lambda session_id, title: (_sessions().filter(pk=session_id, title=""), {"title": title}),
    session_id=int,
    title=str,
)


def sending(session: Any, **fields: Any) -> Callable[[], Entry]:
    """`session.append(**fields)` sent (within `sent_together`, with what else goes), and what
    gives the entry once written (after it)."""
    entry = Entry(session_id=session.pk, **fields).derive()
    reported, added = entry.reported_context, entry.context_added
    written = _entry_sent(entry, reported=reported, added=added)

    def appended() -> Entry:
        if not written():  # as the ORM's get says it
            raise session.DoesNotExist(f"session {session.pk} does not exist.")
        session.leaf = entry
        session.context_tokens = reported or session.context_tokens + added
        return entry

    return appended


def sending_message(
    session: Any, role: str, content: list[dict[str, Any]], **fields: Any
) -> Callable[[], Entry]:
    """`session.append_message(role, content, **fields)` sent (within `sent_together`, with
    what else goes), and what gives the entry once written (after it)."""
    appended = sending(session, kind=Entry.Kind.MESSAGE, role=role, content=content, **fields)
    said = role == Entry.Role.USER and "purpose" not in (fields.get("data") or {})
    if not said or session.title:  # a person's words title it, not agentweb's (a handoff request)
        return appended
    title = title_from(text_of(content))
    TITLED.sent(session_id=session.pk, title=title)

    def titled() -> Entry:
        entry = appended()  # the session is there: its title is the one sent
        session.title = title
        return entry

    return titled


def _entry_sent(entry: Entry, *, reported: int, added: int) -> Callable[[], bool]:
    """`entry` (unsaved, its session's id set) sent to be written under its session's leaf and
    made the leaf, the session's context size set to `reported` (a reply's usage) or grown by
    `added`, atomically; and what says whether it was: False (and nothing written) when the
    session does not exist. After it, `entry` has its id and parent."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "postgresql":
        return _in_one_statement(connection, entry, reported=reported, added=added)
    # All or nothing either way: inside a caller's transaction (the prompt path's), a savepoint
    # would be two statements more for nothing, since no caller goes on after a failure here.
    with transaction.atomic(savepoint=False):
        found = LEAF.first(session_id=entry.session_id)
        if found is None:
            return lambda: False
        (entry.parent_id,) = found
        ENTRY.save(entry)
        written = (REPORTED, reported) if reported else (ADDED, added)
        row = {"session_id": entry.session_id, "leaf_id": entry.pk, "now": timezone.now()}
        written[0].execute(**row, tokens=written[1])
    return lambda: True


def _in_one_statement(
    connection: Any, entry: Entry, *, reported: int, added: int
) -> Callable[[], bool]:
    """PostgreSQL: the leaf read under its row lock, the entry inserted under it and the session
    moved to it, by one statement (data-modifying CTEs; one statement is one transaction)."""
    values = ENTRY.prepared(entry)
    del values[_PARENT]  # the leaf's, read in the statement
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [entry.session_id, *values, now, reported, reported, added, entry.session_id]
    cursor = connection.cursor()
    cursor.execute(_one_statement(), params)

    def written() -> bool:
        with cursor:
            row = cursor.fetchone()
        if row is None:
            return False
        entry.parent_id = row[1]
        ENTRY.saved(entry, row[0])
        return True

    return written


_PARENT = next(n for n, field in enumerate(ENTRY.fields) if field.attname == "parent_id")


@functools.cache
def _one_statement() -> str:
    """Its SQL, built once (PostgreSQL's alone: SQLite has no data-modifying WITH)."""
    connection: Any = connections[DEFAULT_DB_ALIAS]  # each backend's own quoting
    q = connection.ops.quote_name
    sessions, entries = q(_sessions().model._meta.db_table), q(Entry._meta.db_table)
    columns = ", ".join(q(field.column) for field in ENTRY.fields)
    values = ", ".join("leaf.leaf_id" if n == _PARENT else "%s" for n in range(len(ENTRY.fields)))
    return (
        f"WITH leaf AS (SELECT {q('leaf_id')} FROM {sessions} WHERE {q('id')} = %s FOR UPDATE), "
        f"new AS (INSERT INTO {entries} ({columns}) SELECT {values} FROM leaf "
        f"RETURNING {q('id')}, {q('parent_id')}), "
        f"moved AS (UPDATE {sessions} SET {q('leaf_id')} = new.{q('id')}, "
        f"{q('updated_at')} = %s, {q('partial_text')} = '', {q('context_tokens')} = "
        f"CASE WHEN %s > 0 THEN %s ELSE {sessions}.{q('context_tokens')} + %s END "
        f"FROM new WHERE {sessions}.{q('id')} = %s) "
        f"SELECT {q('id')}, {q('parent_id')} FROM new"
    )
