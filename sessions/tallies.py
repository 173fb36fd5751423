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

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from django.db.models import Max, QuerySet, Value

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
    """`fold(value, rows)` over a session's entries, from `empty`: `read(session_id, after)`
    gives the rows of the entries with an id greater than `after`, in order, and `last(row)`
    the id of a row's entry. Values are shared between threads: keep them immutable."""

    def __init__(
        self,
        read: Callable[[int, int], Sequence[Row]],
        last: Callable[[Row], int],
        fold: Callable[[T, Sequence[Row]], T],
        empty: T,
    ) -> None:
        self.read, self.last, self.fold, self.empty = read, last, fold, empty
        self._kept: dict[tuple[int, datetime], tuple[int, T]] = {}

    def of(self, session: SessionLike) -> T:
        """The fold over every entry of `session`, as of now (one small read)."""
        known = (session.pk, session.created_at)
        through, value = self._kept.get(known, (0, self.empty))
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
