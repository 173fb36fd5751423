"""Where a short database call of the prompt path runs: not in line on the one thread.

Every `database_sync_to_async` call of a process runs on one thread, in arrival order, and
that thread shares the interpreter with the event loop. Each time SQLite (or psycopg) lets go
of the GIL inside a call, taking it back waits for the busy loop to hand it over, up to the
interpreter's 5 ms switch interval: under a burst of 200 prompts a SQLite statement that takes
30 µs alone took 590 µs on the thread (cProfile of the thread, docs/PERFORMANCE.md), and each
prompt's request waited for every other prompt's statements.

A *short* call (a few statements, bounded whatever the session's size: the frame's check, a
prompt queued, the next turn, a reply saved) runs where it costs least:

* SQLite: on the event loop's own thread, on a connection of its own, in a transaction that
  takes the write lock at once or not at all (`BEGIN IMMEDIATE` with no busy wait), so
  nothing it does can wait for a lock and stall the loop. When another connection holds the
  lock (a page's write on the one thread, another process), the call goes to the one thread
  as before and waits for the lock there. SQLite has one writer either way; the transaction
  makes the call atomic, which each was meant to be.
* PostgreSQL: on the event loop's own thread too, in a greenlet, on a connection of its own
  (`agentweb.postgresql.on_the_loop`): each wait for the server's answer is a poll of at most
  AGENTWEB_PG_WAIT_IN_LINE_SECONDS (5 ms), and past it the loop serves every other socket
  until the answer comes, so nothing it does (a lock, a slow answer) stalls the loop for
  longer. A call on a thread beside the loop cost as much CPU again in the interpreter lock
  handed back and forth at each round trip. The calls are safe beside any other (a
  generation's writes in another process run beside them in the README's set-up; what keeps
  one generation a session and no prompt lost is the database's atomic claim and row lock,
  not where the call runs).

A long call (a session's whole branch, a page of renders) stays on the one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from channels.db import database_sync_to_async
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction

from agentweb.postgresql import on_the_loop

P = ParamSpec("P")
R = TypeVar("R")
log = logging.getLogger(__name__)

# What a database that does not answer raises (stopped, restarting, out of reach, locked).
NOT_ANSWERING = (OperationalError, InterfaceError)
FIRST_RETRY, LAST_RETRY = 0.25, 4.0  # seconds before trying again: doubled each time, to 4 s

_LOCKED = object()  # the write lock was another connection's: the call did not run
# The loop's connection lives in a context of its own (Django keeps a connection per context
# in async code, so each task would otherwise open one), one per thread that runs a loop.
_contexts = threading.local()


def short(func: Callable[P, R], *, reads: bool = False) -> Callable[P, Awaitable[R]]:
    """`func`, a short database call, as an awaitable that runs it where it costs least.
    `reads`: it only reads (a write it may make is one statement, made again if the call is),
    so on SQLite it takes no write lock: a read never waits for a writer there."""
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    if vendor == "sqlite":
        return _on_the_loop(func, _run_reading if reads else _run_holding_the_lock)
    if vendor == "postgresql":
        return _in_a_greenlet(func)
    return database_sync_to_async(func)


def _in_a_greenlet(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return await on_the_loop.run(functools.partial(func, *args, **kwargs))

    return call


def _on_the_loop(
    func: Callable[P, R], run: Callable[[Callable[[], R]], R | object]
) -> Callable[P, Awaitable[R]]:
    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        done = _context().run(run, functools.partial(func, *args, **kwargs))
        if done is _LOCKED:  # wait for the lock on the one thread
            return await database_sync_to_async(func)(*args, **kwargs)
        return done  # type: ignore[return-value]  # not _LOCKED: func's result

    return call


def _run_holding_the_lock(func: Callable[[], R]) -> R | object:
    """`func()` in a transaction that holds SQLite's write lock from its start, on this thread's
    loop connection; `_LOCKED` (and nothing run) when another connection holds the lock."""
    with _on_the_loop_connection() as connection, contextlib.ExitStack() as transaction_of:
        try:  # BEGIN IMMEDIATE (settings: the transaction mode)
            transaction_of.enter_context(transaction.atomic(using=connection.alias))
        except OperationalError:  # "database is locked"
            return _LOCKED
        return func()


def _run_reading(func: Callable[[], R]) -> R | object:
    """`func()` on this thread's loop connection, outside a transaction; `_LOCKED` when a write
    it made found another connection holding the lock (a read never does)."""
    with _on_the_loop_connection():
        try:
            return func()
        except OperationalError as error:
            if "locked" not in str(error):
                raise
            return _LOCKED


@contextlib.contextmanager
def _on_the_loop_connection() -> Iterator[Any]:
    """This thread's loop connection, ready, with Django's refusal of database calls in a
    thread that runs an event loop lifted meanwhile (these block it for microseconds, and by
    design never for a lock). Django refuses when it sees a running loop: the thread's loop is
    set aside for the call, which touches only this thread (DJANGO_ALLOW_ASYNC_UNSAFE would
    mean changing the process's environment, under other threads' feet, at every call)."""
    loop = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        _never_wait_for_a_lock(connection)
        yield connection
    finally:
        connection.close_if_unusable_or_obsolete()
        asyncio._set_running_loop(loop)


def _never_wait_for_a_lock(connection: Any) -> None:
    """A busy timeout of zero on the loop's connection, set once each time it connects."""
    connection.ensure_connection()
    raw = connection.connection
    if getattr(connection, "agentweb_no_wait_on", None) is not raw:
        raw.execute("PRAGMA busy_timeout = 0")
        connection.agentweb_no_wait_on = raw


def _context() -> contextvars.Context:
    context: contextvars.Context | None = getattr(_contexts, "context", None)
    if context is None:
        context = _contexts.context = contextvars.Context()
    return context


def close_connections() -> None:
    """Close the connections kept for calls on the loop: this thread's loop connection
    (SQLite) and every thread's calls in greenlets (PostgreSQL), before the test database is
    dropped."""
    context = getattr(_contexts, "context", None)
    if context is not None:
        context.run(connections.close_all)
    on_the_loop.close_all()


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
