"""The statements every append runs, for every message of every prompt (issue 21): the
session's leaf read under a lock, the entry's row, and the session's row written after it
(with the title a first message gives), each built once (`sessions.statements`, `Insert`). On
PostgreSQL the three are one statement (`_entry_sent`): a round trip there is 0.5–1 ms, and
the three in a transaction were five of them. The leaf's read may require more of the
session's row (`sending_if`): a prompt sent with its claim is stored only where the claim
holds. The session model is looked up by name: it imports this module."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Case, DateTimeField, F, Model, QuerySet, Value, When, signals
from django.utils import timezone

from ..content import text_of, title_from
from ..statements import Statement, Update
from .entry import Entry

M = TypeVar("M", bound=Model)


class Insert(Generic[M]):
    """A new row of `model`, every column but its generated key: `save(instance)` does what
    the ORM's `save(force_insert=True)` does (each field's pre_save and database preparation,
    the pre_save and post_save signals) with one INSERT written once, and sets the key the
    database gave. For a model whose relations are given as ids (the prompt path's entries)."""

    def __init__(self, model: type[M]) -> None:
        meta = model._meta
        self.model = model
        self.fields = [field for field in meta.concrete_fields if not field.primary_key]
        columns = ", ".join(f'"{field.column}"' for field in self.fields)
        places = ", ".join("%s" for _ in self.fields)
        self.sql = (
            f'INSERT INTO "{meta.db_table}" ({columns}) VALUES ({places}) '
            f'RETURNING "{meta.pk.column}"'
        )

    def save(self, instance: M) -> M:
        values = self.prepared(instance)
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(self.sql, values)
            (key,) = cursor.fetchone()
        return self.saved(instance, key)

    def prepared(self, instance: M) -> list[Any]:
        """The pre_save signal sent, and each field's value as the database takes it (in the
        order of `fields`): what an INSERT of another shape sends too."""
        signals.pre_save.send(**self._saving(instance), using=DEFAULT_DB_ALIAS)
        connection = connections[DEFAULT_DB_ALIAS]
        return [
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for field in self.fields
        ]

    def saved(self, instance: M, key: Any) -> M:
        """The instance as the row `key` written for it, and the post_save signal sent."""
        instance.pk = key
        instance._state.adding, instance._state.db = False, DEFAULT_DB_ALIAS
        signals.post_save.send(**self._saving(instance), created=True, using=DEFAULT_DB_ALIAS)
        return instance

    def _saving(self, instance: M) -> dict[str, Any]:
        return {"sender": self.model, "instance": instance, "raw": False, "update_fields": None}


def _sessions() -> QuerySet[Any, Any]:
    return apps.get_model("chat", "ChatSession").objects.all()


ENTRY = Insert(Entry)  # an entry's row, as `save(force_insert=True)` writes it

# A session's leaf, read where its row cannot change until the append commits: on PostgreSQL
# under the row's lock (FOR UPDATE, added by `_one_statement`), on SQLite in the write
# transaction that holds the database's one write lock.
LEAF = Statement(
    lambda session_id: _sessions().filter(pk=session_id).values_list("leaf_id"),
    session_id=int,
)


def _appended(context: Any) -> Update[Any]:
    """The session row after an entry joined it: the entry is its leaf, its context `context`,
    and `title` its title if it has none (an empty `title` leaves it as it is)."""
    return Update(
        lambda session_id, leaf_id, now, tokens, title: (
            _sessions().filter(pk=session_id),
            {
                "leaf_id": leaf_id,
                "updated_at": now,
                "partial_text": "",
                "context_tokens": context(tokens),
                "title": Case(When(title="", then=Value(title)), default=F("title")),
            },
        ),
        session_id=int,
        leaf_id=int,
        now=datetime,
        tokens=int,
        title=str,
    )


REPORTED = _appended(lambda tokens: tokens)  # a reply's usage says the context's size
ADDED = _appended(lambda tokens: F("context_tokens") + tokens)  # anything else adds its estimate


# A read of the session's leaf as `LEAF` reads it (a `Statement` and its values), which may
# also require a condition of the session's row: the entry is written only when it finds it.
Leaf = tuple[Statement[Any], dict[str, Any]]


def sending(session: Any, *, title: str = "", **fields: Any) -> Callable[[], Entry]:
    """`session.append(**fields)` sent (within `sent_together`, with what else goes), and what
    gives the entry once written (after it). `title`: the session's, if it has none."""
    entry, written = _sent(session.pk, (LEAF, {"session_id": session.pk}), title, fields)

    def appended() -> Entry:
        if not written():  # as the ORM's get says it
            raise session.DoesNotExist(f"session {session.pk} does not exist.")
        joined(session, entry, title)
        return entry

    return appended


def sending_if(
    session_id: int, leaf: Leaf, *, title: str = "", **fields: Any
) -> Callable[[], Entry | None]:
    """An entry sent to be appended to session `session_id` only if `leaf` finds the session's
    row, and what gives it once written (after it), or None when it was not. The caller's
    session object is left as it was (`joined` brings it up to date)."""
    entry, written = _sent(session_id, leaf, title, fields)
    return lambda: entry if written() else None


def joined(session: Any, entry: Entry, title: str = "") -> None:
    """`session` (as read before `entry` was appended to it) as the append left its row: the
    entry its leaf, its context grown or set, and `title` its title if it had none."""
    session.leaf = entry
    session.context_tokens = entry.reported_context or session.context_tokens + entry.context_added
    if title and not session.title:
        session.title = title


def _sent(
    session_id: int, leaf: Leaf, title: str, fields: dict[str, Any]
) -> tuple[Entry, Callable[[], bool]]:
    entry = Entry(session_id=session_id, **fields).derive()
    return entry, _entry_sent(entry, leaf=leaf, title=title)


def sending_message(
    session: Any, role: str, content: list[dict[str, Any]], **fields: Any
) -> Callable[[], Entry]:
    """`session.append_message(role, content, **fields)` sent (within `sent_together`, with
    what else goes), and what gives the entry once written (after it)."""
    title = "" if session.title else title_of(role, content, fields)
    message = {"kind": Entry.Kind.MESSAGE, "role": role, "content": content}
    return sending(session, title=title, **message, **fields)


def title_of(role: str, content: list[dict[str, Any]], fields: dict[str, Any]) -> str:
    """The title a message gives a session that has none: a person's words do, not agentweb's
    (a handoff request) nor the model's."""
    said = role == Entry.Role.USER and "purpose" not in (fields.get("data") or {})
    return title_from(text_of(content)) if said else ""


def _entry_sent(entry: Entry, *, leaf: Leaf, title: str) -> Callable[[], bool]:
    """`entry` (unsaved, its session's id set) sent to be written under its session's leaf, as
    `leaf` reads it, and made the leaf, the session's context size set to the entry's reported
    context (a reply's usage) or grown by its estimate, and `title` made the session's title if
    it has none, atomically; and what says whether it was: False (and nothing written) when
    `leaf` found no row (the session does not exist, or its condition does not hold). After
    it, `entry` has its id and parent."""
    connection = connections[DEFAULT_DB_ALIAS]
    reported, added = entry.reported_context, entry.context_added
    if connection.vendor == "postgresql":
        return _in_one_statement(connection, entry, leaf, (reported, added, title))
    # All or nothing either way: inside a caller's transaction (the prompt path's), a savepoint
    # would be two statements more for nothing, since no caller goes on after a failure here.
    with transaction.atomic(savepoint=False):
        statement, values = leaf
        found = statement.first(**values)
        if found is None:
            return lambda: False
        (entry.parent_id,) = found
        ENTRY.save(entry)
        written = (REPORTED, reported) if reported else (ADDED, added)
        row = {"session_id": entry.session_id, "leaf_id": entry.pk, "now": timezone.now()}
        written[0].execute(**row, tokens=written[1], title=title)
    return lambda: True


def _in_one_statement(
    connection: Any, entry: Entry, leaf: Leaf, moved: tuple[int, int, str]
) -> Callable[[], bool]:
    """PostgreSQL: the leaf read under its row lock, the entry inserted under it and the session
    moved to it (and titled), by one statement (data-modifying CTEs; one statement is one
    transaction)."""
    statement, values = leaf
    leaf_sql, leaf_params = statement.sql(**values)
    reported, added, title = moved
    row = ENTRY.prepared(entry)
    del row[_PARENT]  # the leaf's, read in the statement
    now = _NOW.get_db_prep_value(timezone.now(), connection)
    params = [*leaf_params, *row, now, reported, reported, added, title, entry.session_id]
    cursor = connection.cursor()
    cursor.execute(_one_statement(leaf_sql), params)

    def written() -> bool:
        with cursor:
            found = cursor.fetchone()
        if found is None:
            return False
        entry.parent_id = found[1]
        ENTRY.saved(entry, found[0])
        return True

    return written


_NOW = DateTimeField()  # prepares the moment of the append as the ORM sends it
_PARENT = next(n for n, field in enumerate(ENTRY.fields) if field.attname == "parent_id")


@functools.cache
def _one_statement(leaf: str) -> str:
    """Its SQL around the leaf's read `leaf`, built once (PostgreSQL's alone: SQLite has no
    data-modifying WITH)."""

    def q(name: str | None) -> str:  # a name quoted as PostgreSQL (and the SQL standard) quotes it
        return f'"{name}"'

    sessions, entries = q(_sessions().model._meta.db_table), q(Entry._meta.db_table)
    columns = ", ".join(q(field.column) for field in ENTRY.fields)
    values = ", ".join("leaf.leaf_id" if n == _PARENT else "%s" for n in range(len(ENTRY.fields)))
    title = f"{sessions}.{q('title')}"
    return (
        f"WITH leaf AS ({leaf} FOR UPDATE), "
        f"new AS (INSERT INTO {entries} ({columns}) SELECT {values} FROM leaf "
        f"RETURNING {q('id')}, {q('parent_id')}), "
        f"moved AS (UPDATE {sessions} SET {q('leaf_id')} = new.{q('id')}, "
        f"{q('updated_at')} = %s, {q('partial_text')} = '', {q('context_tokens')} = "
        f"CASE WHEN %s > 0 THEN %s ELSE {sessions}.{q('context_tokens')} + %s END, "
        f"{q('title')} = CASE WHEN {title} = '' THEN %s ELSE {title} END "
        f"FROM new WHERE {sessions}.{q('id')} = %s) "
        f"SELECT {q('id')}, {q('parent_id')} FROM new"
    )
