"""Database calls that may run beside one another on PostgreSQL.

Every `database_sync_to_async` call of a process runs on one thread, in arrival order. On
PostgreSQL a prompt's set-up is a dozen round trips, so under a burst the prompts wait for
each other's round trips in turn. The calls here are already safe beside any other
(a generation's writes in another process run beside them in the README's set-up: their
atomicity is the database's, not the thread's), so there they run on a pool of their own.
SQLite has one writer: they stay on the one thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from channels.db import database_sync_to_async
from django.db import connections

THREADS = 4
_pool: ThreadPoolExecutor | None = None


def beside(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` as `database_sync_to_async` gives it, on the pool on PostgreSQL."""
    global _pool
    if connections["default"].vendor != "postgresql":
        return database_sync_to_async(func)
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="beside")
    return database_sync_to_async(func, thread_sensitive=False, executor=_pool)


def close_connections() -> None:
    """Close the connection each of the pool's threads keeps (before its database is dropped):
    one call on each thread, all of them held at a barrier until every thread has one."""
    if _pool is None:
        return
    barrier = threading.Barrier(THREADS)

    def close() -> None:
        barrier.wait(timeout=10)
        connections.close_all()

    for closing in [_pool.submit(close) for _ in range(THREADS)]:
        closing.result(timeout=20)
