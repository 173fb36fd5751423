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
from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from .entry import Entry

Row = TypeVar("Row")
SQLITE_PAUSE = 0.12  # seconds between two transactions on SQLite
# A session being built holds a lease, renewed at each batch (in its claim's lease column):
# one whose lease ran out was left by a process that stopped. It no longer stands in the way
# of its owner's next fork, and is purged (at the next look at the owner's list, and at
# start-up). A session made before leases counts as left after an hour.
LEASE = timedelta(seconds=60)
ABANDONED_AFTER = timedelta(hours=1)
# Rows an UPDATE of `bulk_update` sets: each is a CASE of one branch a row, which the database
# walks for every row it updates.
UPDATE_BATCH = 100


def batch_size() -> int:
    return settings.AGENTWEB_WRITE_BATCH


def pause() -> None:
    """Let the writers waiting on SQLite's lock in (PostgreSQL locks rows: no one waits)."""
    if connection.vendor == "sqlite":
        time.sleep(SQLITE_PAUSE)


def in_batches(
    rows: Sequence[Row],
    write: Callable[[Sequence[Row]], object],
    *,
    each: Callable[[], object] | None = None,
) -> None:
    """`write` each batch of `rows` in a transaction of its own, pausing between them; `each`
    after every batch, in its transaction (a building session's lease renewed)."""
    size = batch_size()
    for start in range(0, len(rows), size):
        if start:
            pause()
        with transaction.atomic():
            write(rows[start : start + size])
            if each is not None:
                each()


def lease() -> datetime:
    """Where a building session's lease ends, taken or renewed now."""
    return timezone.now() + LEASE


def abandoned() -> Q:
    """The sessions a process that stopped left half built: their lease ran out."""
    now = timezone.now()
    return Q(building=True) & (
        Q(generation_lease_until__lt=now)
        | Q(generation_lease_until__isnull=True, created_at__lt=now - ABANDONED_AFTER)
    )


def copy_entries(
    branch: Sequence[Entry], session_id: int, renew: Callable[[], object]
) -> list[Entry]:
    """Copies of a branch's entries (root first, each the parent of the next) in session
    `session_id`, which holds no other entry: each copy's parent is the copy before it, and a
    marker's references point at the copies. `renew` the session's lease at each batch."""
    new_id: dict[int, int] = {}
    copies: list[Entry] = []

    def copy(chunk: Sequence[Entry]) -> None:
        made = Entry.objects.bulk_create([entry.copy_to(session_id) for entry in chunk])
        # Each copy's parent is the session's entry just before it (made in branch order, in a
        # session of its own): one statement a batch, where a CASE a row was minutes of work.
        before = Entry.objects.filter(session_id=session_id, pk__lt=OuterRef("pk"))
        latest = before.order_by("-pk").values("pk")[:1]
        Entry.objects.filter(pk__in=[c.pk for c in made]).update(parent_id=Subquery(latest))
        for copy in made:
            copy.parent_id = copies[-1].pk if copies else None
            copies.append(copy)
        new_id.update((old.pk, copy.pk) for old, copy in zip(chunk, made, strict=True))
        pointing = [copy for copy in made if _point_references(copy, new_id)]
        Entry.objects.bulk_update(pointing, ["data"], batch_size=UPDATE_BATCH)

    in_batches(branch, copy, each=renew)
    return copies


def _point_references(copy: Entry, new_id: dict[int, int]) -> bool:
    """A marker's references to entries (a compaction's first kept one) follow the copy; a
    message's details are its own, whatever they hold. Whether the copy has references."""
    refs = copy.data.get("refs")
    if copy.kind in (Entry.Kind.MESSAGE, Entry.Kind.CUSTOM_MESSAGE) or not isinstance(refs, dict):
        return False
    copy.data["refs"] = {
        name: new_id[target]
        for name, target in refs.items()
        if isinstance(target, int) and target in new_id
    }
    return True


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
