"""Folds over a session's entries that a process keeps, and brings up to date from the entries
written since, instead of reading every entry of a long session at every prompt (issue 21: the
session's cost on its status line, the sessions its messages mention, the todo list's changes).

Sound because what a fold reads of an entry never changes once it is written, and a session's
entries are written in order of their ids: each append holds the session's row (PostgreSQL) or
the database's one write lock (SQLite) from reading the leaf to its commit, so no entry of a
session commits after one with a greater id. Entries are deleted only with their session. A
session is known by its id and its creation time: a database emptied and filled again (a
test's) gives old ids to new sessions.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

from django.db import connection, transaction
from django.db.models import Max, Q, QuerySet, Value

from .statements import Rows, Statement

Row = TypeVar("Row")
T = TypeVar("T")

REMEMBERED = 10_000  # sessions a tally keeps; more and it starts again


def with_the_newest(new: QuerySet[Any, Any], matching: QuerySet[Any, Any], nothing: Value) -> Any:
    """`matching`, rows (id, value) of the entries among `new` (a session's entries after the
    last one read) that a fold takes, and one more row: the greatest id among all of `new`,
    with `nothing` beside it. One statement, and the tally knows how far it has read without
    reading every entry."""
    newest = new.values("session_id").annotate(newest=Max("id"), nothing=nothing)
    return matching.union(newest.values_list("newest", "nothing"), all=True)


class SessionLike(Protocol):
    @property
    def pk(self) -> int: ...

    @property
    def created_at(self) -> datetime: ...


class Tally(Generic[Row, T]):
    """`fold(value, rows)` over a session's entries, from `empty`: `statement` gives the rows
    of the entries with an id greater than `after` (its parameters: `session_id`, `after`), in
    order, which `taken` may complete (with reads of its own), and `last(row)` is the id of a
    row's entry. Values are shared between threads: keep them immutable."""

    def __init__(
        self,
        statement: Statement[Any],
        last: Callable[[Row], int],
        fold: Callable[[T, Sequence[Row]], T],
        empty: T,
        taken: Callable[[Rows], Sequence[Row]] | None = None,
        many: Callable[[Q], QuerySet[Any, Any]] | None = None,
    ) -> None:
        """`many`, for `reading_ahead_of_many`: the rows `statement` gives, of every entry that
        a filter of entries selects, each with its session's id first."""
        self.statement, self.last, self.fold, self.empty = statement, last, fold, empty
        self._taken, self.many = taken, many
        self._kept: dict[tuple[int, datetime], tuple[int, T]] = {}

    def through(self, known: tuple[int, datetime]) -> int:
        """The last entry this tally has read of the session `known` (its id and creation)."""
        return self._kept.get(known, (0, self.empty))[0]

    def read(self, session_id: int, after: int) -> Sequence[Row]:
        return self.taken(self.statement.rows(session_id=session_id, after=after))

    def taken(self, rows: Rows) -> Sequence[Row]:
        return self._taken(rows) if self._taken else cast(Sequence[Row], rows)

    def of(self, session: SessionLike) -> T:
        """The fold over every entry of `session`, as of now (one small read, or none when
        `reading_ahead` read it)."""
        known = (session.pk, session.created_at)
        through, value = self._kept.get(known, (0, self.empty))
        ahead: dict[tuple[int, int, datetime], tuple[int, Sequence[Row]]] = getattr(
            _ahead, "rows", {}
        )
        read = ahead.pop((id(self), *known), None)
        if read is not None and read[0] == through:
            rows = read[1]
        else:
            rows = self.read(session.pk, through)
        if rows:
            value = self.fold(value, rows)
            through = max(through, *(self.last(row) for row in rows))
            if len(self._kept) >= REMEMBERED:
                self._kept.clear()
            self._kept[known] = (through, value)
        return value

    def forget(self) -> None:
        """Keep nothing: every session is read whole next time."""
        self._kept.clear()


_ahead = threading.local()  # rows read ahead, by tally and session, in this thread


def _rows_ahead() -> dict[tuple[int, int, datetime], tuple[int, Sequence[Any]]]:
    """This thread's rows read ahead: (tally, session, its creation) → (read after, rows)."""
    rows = getattr(_ahead, "rows", None)
    if rows is None:
        rows = _ahead.rows = {}
    return cast(dict[tuple[int, int, datetime], tuple[int, Sequence[Any]]], rows)


def reading_ahead(
    session: SessionLike, *tallies: Tally[Any, Any]
) -> contextlib.AbstractContextManager[None]:
    """The new entries of `session` for each of `tallies`, read at once for their `of` calls
    within the block to take instead of reading each its own: each gives its fold as of the
    block's start (what the block writes is read by the next `of`). A tally that moved on
    meanwhile reads again; what the block did not take is dropped."""
    return sending_reads(session, *tallies)


def sending_reads(
    session: SessionLike, *tallies: Tally[Any, Any]
) -> contextlib.AbstractContextManager[None]:
    """`reading_ahead`'s reads sent (within `sent_together`, with what else goes: after a
    write sent before them, they read it), and the block that takes them (after it)."""
    known = (session.pk, session.created_at)
    afters = [tally.through(known) for tally in tallies]
    sent = [
        tally.statement.send(session_id=session.pk, after=after)
        for tally, after in zip(tallies, afters, strict=True)
    ]
    return _taking(known, tallies, afters, sent)


MANY = 200  # sessions read in one statement by `reading_ahead_of_many`


@contextlib.contextmanager
def reading_ahead_of_many(
    sessions: Sequence[SessionLike], *tallies: Tally[Any, Any]
) -> Iterator[None]:
    """`reading_ahead`, for many sessions: the new entries of all of them, one statement for
    each tally (its `many`), not one for each session."""
    rows = _rows_ahead()
    with _serially():
        keys = _read_many(rows, sessions, tallies)
    try:
        yield
    finally:
        for key in keys:
            rows.pop(key, None)


def _read_many(
    rows: dict[tuple[int, int, datetime], tuple[int, Sequence[Any]]],
    sessions: Sequence[SessionLike],
    tallies: Sequence[Tally[Any, Any]],
) -> list[tuple[int, int, datetime]]:
    """`reading_ahead_of_many`'s reads, put where each tally's `of` takes them; their keys."""
    keys = []
    for tally in tallies:
        assert tally.many is not None, "a tally read for many sessions says how (`many`)"
        for start in range(0, len(sessions), MANY):
            some = sessions[start : start + MANY]
            afters = {one.pk: tally.through((one.pk, one.created_at)) for one in some}
            new = Q()
            for session_id, after in afters.items():
                new |= Q(session_id=session_id, pk__gt=after)
            by_session: dict[int, list[tuple[Any, ...]]] = {pk: [] for pk in afters}
            for session_id, *row in tally.many(new):
                by_session[session_id].append(tuple(row))
            for session in some:
                key = (id(tally), session.pk, session.created_at)
                rows[key] = (afters[session.pk], tally.taken(by_session[session.pk]))
                keys.append(key)
    return keys


@contextlib.contextmanager
def _serially() -> Iterator[None]:
    """The block's reads without parallel workers on PostgreSQL: the planner takes a session's
    entries after an id for that share of the whole table's (it cannot know that a session's
    ids run together), and starting the workers it plans for cost 5 ms a read that finds
    none (bench/many_sessions.py)."""
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        yield


@contextlib.contextmanager
def _taking(
    known: tuple[int, datetime],
    tallies: Sequence[Tally[Any, Any]],
    afters: list[int],
    sent: list[Callable[[], Rows]],
) -> Iterator[None]:
    rows = _rows_ahead()
    for tally, after, read in zip(tallies, afters, sent, strict=True):
        rows[(id(tally), *known)] = (after, tally.taken(read()))
    try:
        yield
    finally:
        for tally in tallies:
            rows.pop((id(tally), *known), None)
