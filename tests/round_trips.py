"""Round trips to PostgreSQL, counted from libpq's own trace of the protocol's messages: each
time the client stops sending and waits for the server's answers is one (a statement sent
alone; a pipeline's flush or sync)."""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from typing import Any

from psycopg import pq


@contextlib.contextmanager
def counted(connection: Any) -> Iterator[list[int]]:
    """`[n]`: the round trips Django's `connection` made in the block, once it ends."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    trips: list[int] = []
    with tempfile.TemporaryFile() as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield trips
        finally:
            pgconn.untrace()
        trace.seek(0)
        senders = [line.split(b"\t", 1)[0] for line in trace.read().splitlines()]
    trips.append(sum(1 for pair in itertools.pairwise(senders) if pair == (b"F", b"B")))
