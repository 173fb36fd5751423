"""Django's PostgreSQL backend with its health check made where it can find something.

With CONN_HEALTH_CHECKS, Django checks a kept connection (a `SELECT 1` round trip) before the
first statement of every request, and under the ASGI server every database call is a request
of its own: a prompt's frame check, its claim, its notes and tools each paid a round trip more,
which 200 prompts at once wait for before their first deltas (docs/PERFORMANCE.md).

The check is for a connection that sat idle while the server went away (a restart, an idle
timeout). A connection that sent a statement less than HEALTHY_FOR seconds ago is taken as it
is: should the server be gone all the same, its statement fails as it would have without the
check, and Django closes a connection whose call raised a database error, so the next call
connects afresh.
"""

from __future__ import annotations

import contextlib
import math
import time
import types
from collections.abc import Iterator
from typing import Any

import greenlet
import psycopg
from django.db.backends.postgresql import base

from . import on_the_loop
from .pipeline import entered

HEALTHY_FOR = 1.0  # seconds since a connection's last statement in which it is not checked


class Driver(types.ModuleType):
    """psycopg as Django's backend reads it (its errors, its types), whose `connect` makes a
    `Connection` (defined below)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(psycopg, name)

    @staticmethod
    def connect(*args: Any, **kwargs: Any) -> Connection:
        return Connection.connect(*args, **kwargs)


class DatabaseWrapper(base.DatabaseWrapper):  # type: ignore[misc]  # Django's is untyped
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.used_at = -math.inf  # when this connection last made a cursor

    def close_if_health_check_failed(self) -> None:
        now = time.monotonic()
        if self.connection is not None and now - self.used_at < HEALTHY_FOR:
            self.health_check_done = True  # used a moment ago: as good as checked
        super().close_if_health_check_failed()
        self.used_at = now

    # psycopg, its connections made by `Connection` (waits a call on the loop's thread hands over).
    Database = Driver("psycopg")


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, whose waits for the server a call on the event loop's thread
    makes its own way (`on_the_loop.Call.wait`); elsewhere (a thread), psycopg's own wait.
    Its pipelines write their statements together (`pipeline.Pipeline`)."""

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[psycopg.Pipeline]:
        with entered(self) as pipeline:
            yield pipeline

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        call = greenlet.getcurrent()
        if not isinstance(call, on_the_loop.Call) or kwargs.get("timeout") is not None:
            return super().wait(gen, *args, **kwargs)
        try:
            return call.wait(gen, self.pgconn.socket)
        except OSError as error:  # as psycopg's own waits say it
            raise psycopg.OperationalError("connection socket closed") from error
