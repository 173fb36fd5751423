"""Large writes in short transactions, so that no other user waits on them (issue 18, item 1).

On SQLite a write transaction holds the one write lock of the whole database: a fork of
99,000 entries copied in one transaction kept every other user's writes waiting for 50 s. Here
a large copy or delete goes BATCH rows per transaction, with a pause between transactions on
SQLite long enough for a waiting writer to take the lock (its busy handler looks again every
100 ms once it has waited a while). A session being filled this way is `building`: out of
sight (`ChatSession.kept()`) until its last batch is in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from .entry import Entry

Row = TypeVar("Row")
SQLITE_PAUSE = 0.12  # seconds between two transactions on SQLite
# A session still building after this long was left by a process that died: it is purged.
ABANDONED_AFTER = timedelta(hours=1)


def batch_size() -> int:
    return settings.AGENTWEB_WRITE_BATCH


def pause() -> None:
    """Let the writers waiting on SQLite's lock in (PostgreSQL locks rows: no one waits)."""
    if connection.vendor == "sqlite":
        time.sleep(SQLITE_PAUSE)


def in_batches(rows: Sequence[Row], write: Callable[[Sequence[Row]], object]) -> None:
    """`write` each batch of `rows` in a transaction of its own, pausing between them."""
    size = batch_size()
    for start in range(0, len(rows), size):
        if start:
            pause()
        with transaction.atomic():
            write(rows[start : start + size])


def copy_entries(originals: Sequence[Entry], session_id: int) -> list[Entry]:
    """Copies of a branch's entries (root first) in session `session_id`, with their parents
    and a marker's references pointing at the copies."""
    new_id: dict[int, int] = {}
    copies: list[Entry] = []

    def copy(chunk: Sequence[Entry]) -> None:
        made = Entry.objects.bulk_create([entry.copy_to(session_id) for entry in chunk])
        new_id.update((old.pk, copy.pk) for old, copy in zip(chunk, made, strict=True))
        for old, copy in zip(chunk, made, strict=True):
            copy.parent_id = new_id.get(old.parent_id) if old.parent_id else None
            _point_references(copy, new_id)
        Entry.objects.bulk_update(made, ["parent", "data"])
        copies.extend(made)

    in_batches(originals, copy)
    return copies


def _point_references(copy: Entry, new_id: dict[int, int]) -> None:
    """A marker's references to entries (a compaction's first kept one) follow the copy; a
    message's details are its own, whatever they hold."""
    refs = copy.data.get("refs")
    if copy.kind not in (Entry.Kind.MESSAGE, Entry.Kind.CUSTOM_MESSAGE) and isinstance(refs, dict):
        copy.data["refs"] = {
            name: new_id[target]
            for name, target in refs.items()
            if isinstance(target, int) and target in new_id
        }


def delete_entries(session_id: int) -> None:
    """Every entry of a session, BATCH per transaction, children before their parents."""
    entries = Entry.objects.filter(session_id=session_id)
    entries.filter(parent_id__gt=F("id")).update(parent=None)  # a file listed a child first
    size = batch_size()
    first = True
    while ids := list(entries.order_by("-id").values_list("id", flat=True)[:size]):
        if not first:
            pause()
        first = False
        with transaction.atomic():
            Entry.objects.filter(pk__in=ids).delete()


def abandoned_before() -> datetime:
    return timezone.now() - ABANDONED_AFTER
