"""PostgreSQL: a short database call on the event loop's own thread, in a greenlet.

A call on a thread beside the loop (as `database_sync_to_async` makes it) shares the
interpreter's lock with the busy loop: each of its round trips takes the lock back, and the
loop's own work waits meanwhile. Under a burst of 200 prompts the four threads that ran the
prompt path's calls cost as much CPU as the loop itself, 3–4 ms a prompt more than the same
calls on SQLite (docs/PERFORMANCE.md).

Here the call runs on the loop's thread, as SQLAlchemy runs its ORM over asyncio drivers: in a
greenlet of its own, on a Django connection of its own (at most `CONNECTIONS` at once). Its
waits for the server are its connection's (`agentweb.postgresql.base.Connection`): the socket
is polled for at most AGENTWEB_PG_WAIT_IN_LINE_SECONDS (5 ms), in which a nearby server has
answered, and the call goes on at once; past it (a lock waited for, a slow answer) the
greenlet hands the wait to the loop, which serves every other socket until this one is ready
and then switches back in. So the loop never waits for a lock or a slow server longer than
that, and a call whose server answers in time costs no more than on SQLite's connection on
the loop. Waiting in line is cheaper than handing every wait to the loop: a handed wait
resumes only after a whole turn of the loop, which in a burst of prompts runs every other
prompt's work, and holds its connection meanwhile (docs/PERFORMANCE.md: handing over past
1 ms doubled the first delta's wait; past 5 ms it is shorter than on threads). For a server
across a network, where the wait in line would be the loop's idle time, set it to 0.

A call that opens its connection waits in line for up to CONNECTING_IN_LINE (50 ms) instead:
a new server process answers its first statements slowly (5–8 ms for a prompt's claim, its
caches filled and its statements planned), and one such wait handed to the loop spread a
burst of prompts over every connection the loop may open, each as slow at first in turn: the
first delta of 200 at once in one process, 0.75 s, became 1.1 s in half the runs.

The call's code is the synchronous ORM code that runs everywhere else: the guarantees are the
database's (the claim's atomic UPDATE, the row locks), as on a thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import select
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import greenlet
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from psycopg import waiting

R = TypeVar("R")

CONNECTIONS = 8  # the connections of a loop's calls (each thread's that runs one)
CONNECTING_IN_LINE = 0.05  # seconds: the wait in line of a call that opens its connection


class Call(greenlet.greenlet):
    """One call, in a greenlet whose parent is the loop's side (`run`)."""

    def __init__(self, run: Callable[[], Any]) -> None:
        super().__init__(run)
        self.in_line = settings.AGENTWEB_PG_WAIT_IN_LINE_SECONDS

    def wait(self, gen: Any, fileno: int) -> Any:
        """What psycopg's generator `gen` gives when done, each of its waits for the socket
        `fileno` made in line for at most `in_line` (AGENTWEB_PG_WAIT_IN_LINE_SECONDS, or
        CONNECTING_IN_LINE for a call that opens its connection), else by the loop."""
        try:
            wanted = next(gen)
            while True:
                ready = _ready_within(fileno, wanted, self.in_line)
                if not ready:  # the loop's turn: it switches back in when the socket is ready
                    ready = self.parent.switch((fileno, wanted))
                wanted = gen.send(ready)
        except StopIteration as done:
            return done.value


async def run(func: Callable[[], R]) -> R:
    """`func()` on this thread, in a greenlet, on a connection kept for it. Cancelling the
    caller does not stop it midway (as a thread's call would not be): it runs to its end.

    With a connection idle, the call starts at once, in the caller's own step of the loop, and
    a call whose answers come in line ends there: the caller goes on without waiting for a turn
    of the loop (a new task's start, then the caller's wake-up, each behind every other ready
    task: under load a Cancel's frame check waited 100 ms and more for them). Only a call that
    hands a wait to the loop goes on in a task of its own."""
    kept = _kept()
    if not kept.idle:
        return await asyncio.shield(asyncio.ensure_future(_run(func)))
    connection = kept.idle.pop()
    call, request = _started(func, connection)
    if call.dead:
        kept.give_back(connection)
        return request  # type: ignore[no-any-return]  # the call's result
    return await asyncio.shield(asyncio.ensure_future(_went_on(call, request, connection)))


async def _run(func: Callable[[], R]) -> R:
    connection = await _kept().take()
    return await _went_on(*_started(func, connection), connection)  # type: ignore[no-any-return]


def _started(func: Callable[[], R], connection: Any) -> tuple[Call, Any]:
    """The call begun on `connection`, run until it waits (its wait) or ends (its result);
    should it raise, its connection is given back."""
    call = None
    try:
        call = _call(func, connection)
        return call, _as_its_own(connection, call.switch)
    except BaseException:
        _ended(call, connection)
        raise


def _call(func: Callable[[], R], connection: Any) -> Call:
    """The greenlet that runs `func()` on `connection`, as Django runs a request's code."""

    def in_the_greenlet() -> R:
        connection.close_if_unusable_or_obsolete()  # as Django does before each request
        if connection.connection is None and call.in_line:  # a new server process: cold
            call.in_line = max(call.in_line, CONNECTING_IN_LINE)
        try:
            return func()
        finally:
            connection.close_if_unusable_or_obsolete()

    call = Call(in_the_greenlet)
    call.gr_context = contextvars.copy_context()  # as `sync_to_async` runs it
    return call


async def _went_on(call: Call, request: Any, connection: Any) -> Any:
    """The call resumed, each time the socket it waits for is ready, to its end (its result);
    its connection then given back."""
    try:
        while not call.dead:
            fileno, wanted = request
            ready = await _ready(fileno, wanted)
            request = _as_its_own(connection, functools.partial(call.switch, ready))
        return request
    finally:
        _ended(call, connection)


def _ended(call: Call | None, connection: Any) -> None:
    """The call over: its connection given back for the next one. A call stopped midway (its
    task cancelled, as when its loop closes) still holds the connection, its lock taken and
    its transaction open: given back, the next call on it would wait for that lock, and block
    the loop's thread, forever. Its connection is closed under it instead, the call unwound,
    and the connection never used again."""
    if call is None or call.dead:
        _kept().give_back(connection)
        return
    raw = connection.connection
    if raw is not None:  # its statement cancelled: a server busy with it sees no closed socket
        with contextlib.suppress(Exception):
            raw.cancel_safe(timeout=1.0)
    # Closed (its transaction rolled back on the server, its lock let go), then unwound: Django
    # sees the connection closed in its transaction, so neither rolls back nor connects again.
    for run in (connection.close, functools.partial(call.throw, greenlet.GreenletExit)):
        with contextlib.suppress(Exception):  # what the unwinding raises has no one to tell
            _as_its_own(connection, run)
    _kept().drop(connection)


def _as_its_own(connection: Any, run: Callable[[], R]) -> R:
    """`run()` (a switch into a call, until it waits, giving its wait's fd and flags, or ends,
    giving its result) with `connection` as this thread's Django connection and no running
    loop meanwhile (Django refuses its synchronous calls where a loop runs)."""
    loop = asyncio._get_running_loop()
    # Django's connections by alias: with no running loop, this thread's own.
    storage: Any = getattr(connections, "_connections")  # noqa: B009  # not in its typing
    asyncio._set_running_loop(None)
    before = getattr(storage, DEFAULT_DB_ALIAS, None)
    setattr(storage, DEFAULT_DB_ALIAS, connection)
    try:
        return run()
    finally:
        if before is None:
            delattr(storage, DEFAULT_DB_ALIAS)
        else:
            setattr(storage, DEFAULT_DB_ALIAS, before)
        asyncio._set_running_loop(loop)


async def _ready(fileno: int, wanted: int) -> int:
    """Once the socket is ready for what psycopg waits for: for which (its Ready flags)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[int] = loop.create_future()

    def wake(flag: int) -> None:
        if not ready.done():
            ready.set_result(flag)

    reading, writing = wanted & waiting.WAIT_R, wanted & waiting.WAIT_W
    if reading:
        loop.add_reader(fileno, wake, waiting.READY_R)
    if writing:
        loop.add_writer(fileno, wake, waiting.READY_W)
    try:
        return await ready
    finally:
        if reading:
            loop.remove_reader(fileno)
        if writing:
            loop.remove_writer(fileno)


def _ready_within(fileno: int, wanted: int, seconds: float) -> int:
    """What the socket is ready for (psycopg's Ready flags) within `seconds`, or 0."""
    reading, writing = wanted & waiting.WAIT_R, wanted & waiting.WAIT_W
    poller = select.poll()
    poller.register(fileno, (select.POLLIN if reading else 0) | (select.POLLOUT if writing else 0))
    ready = 0
    for _, events in poller.poll(seconds * 1000):
        if reading and events & (select.POLLIN | select.POLLERR | select.POLLHUP):
            ready |= waiting.READY_R
        if writing and events & (select.POLLOUT | select.POLLERR | select.POLLHUP):
            ready |= waiting.READY_W
    return ready


class Kept:
    """The Django connections of this thread's calls: up to CONNECTIONS, each one call's at a
    time; a call that finds them all taken waits for one."""

    def __init__(self) -> None:
        self.idle: list[Any] = []
        self.made: list[Any] = []
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()

    async def take(self) -> Any:
        if self.idle:
            return self.idle.pop()
        if len(self.made) < CONNECTIONS:
            return self._new()
        given: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append(given)
        return await given

    def give_back(self, connection: Any) -> None:
        while self.waiting:
            given = self.waiting.popleft()
            if not given.done():
                given.set_result(connection)
                return
        self.idle.append(connection)

    def drop(self, connection: Any) -> None:
        """`connection` is not given back (its call was stopped midway): a call waiting for
        one gets a new one."""
        self.made.remove(connection)
        if any(not given.done() for given in self.waiting):
            self.give_back(self._new())

    def _new(self) -> Any:
        connection = connections.create_connection(DEFAULT_DB_ALIAS)
        connection.inc_thread_sharing()  # closed at exit by whichever thread closes them
        self.made.append(connection)
        return connection

    def close(self) -> None:
        for connection in self.made:
            connection.close()


_threads = threading.local()
_all: list[Kept] = []  # every thread's, to close them all at exit


def _kept() -> Kept:
    kept: Kept | None = getattr(_threads, "kept", None)
    if kept is None:
        kept = _threads.kept = Kept()
        _all.append(kept)
    return kept


def close_all() -> None:
    """Close the connections kept for calls on the loop, on every thread (before the test
    database is dropped)."""
    for kept in _all:
        kept.close()
