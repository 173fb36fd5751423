"""How async code reaches the database: Channels' `database_sync_to_async`, always (on
PostgreSQL, on a connection of Django's pool).

Its calls run, one at a time, on one thread the process shares. A *short* call of a prompt's
path (a few statements, bounded whatever the session's size: a frame's check, a prompt
queued, the next turn, a reply saved) runs instead on one of a few threads of its own
(`thread_sensitive=False`, `short_calls`), so that no prompt waits in line behind a long call
(a page of thousands of entries, a fork) on the one thread. A write that must not be lost to
an outage (a reply's final save, the next turn, the release of a claim) is made through
`until_it_answers`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)

# What a database that does not answer raises (stopped, restarting, out of reach, locked).
NOT_ANSWERING = (OperationalError, InterfaceError)
FIRST_RETRY, LAST_RETRY = 0.25, 4.0  # seconds before trying again: doubled each time, to 4 s


@functools.cache
def short_calls() -> ThreadPoolExecutor:
    """The threads of a prompt's short calls: the process's, whatever event loop calls (a loop's
    own default pool ends with the loop, and a thread that ends holding a connection of
    Django's pool keeps it from the pool for good). AGENTWEB_SHORT_CALL_THREADS of them: one on
    SQLite, whose one writer would keep more waiting on its lock, a few on PostgreSQL."""
    threads = settings.AGENTWEB_SHORT_CALL_THREADS
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="short-db-call")


def short(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`func`, a short call of a prompt's path, as `database_sync_to_async` runs it on one of
    the short calls' threads (not in line on the one thread)."""
    call = database_sync_to_async(func, thread_sensitive=False, executor=short_calls())
    return call  # type: ignore[no-any-return]


async def until_it_answers(
    call: Callable[[], Awaitable[R]],
    *,
    waiting: Callable[[], Awaitable[None]] | None = None,
    going_on: Callable[[], bool] = lambda: True,
) -> R:
    """`call()`, made again, each time a little later, until the database answers: a write
    that must not be lost (a reply's final save, the release of a claim) waits out an outage,
    what it writes held in memory meanwhile. `waiting()` is awaited once, at the first failure
    (the tabs say "Saving…"); when `going_on()` says no more (the claim was lost), the last
    error is raised."""
    delay, told = FIRST_RETRY, False
    while True:
        try:
            return await call()
        except NOT_ANSWERING as error:
            if not going_on():
                raise
            log.warning("the database did not answer (%s): trying again in %.2f s", error, delay)
            if waiting is not None and not told:
                told = True
                await waiting()
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_RETRY)
