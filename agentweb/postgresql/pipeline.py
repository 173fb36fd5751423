"""psycopg's pipeline, its statements written to the server together.

psycopg's pipeline mode sends a block's statements without waiting for their answers, but
writes each one as it is executed: a `send` of its own, and a wake of the server's process,
a statement. `statements.sent_together` sends a prompt's claim, its append and its reads as
one block, to be answered at its end. Here the block's statements wait in the pipeline's
queue until its sync (or a read inside the block, which needs them sent), then go into
libpq's buffer together and out in one write. On a pipeline of six statements: a third less
CPU on either side, client and server (docs/PERFORMANCE.md), as PostgreSQL 17's
`PQsendPipelineSync` has libpq do for the sync itself.

What psycopg does with the answers, their errors and the transaction is unchanged: only when
the statements leave differs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.abc import PQGen


class Pipeline(psycopg.Pipeline):
    def _communicate_gen(self) -> PQGen[None]:
        """A statement executed waits for the block's end (its sync); at the sync, every
        statement waiting is written at once, and what answers came are read as psycopg does."""
        queue = self.command_queue
        if queue and queue[-1] != self.pgconn.pipeline_sync:  # a statement's, not the sync's
            return
        self._buffered()
        yield from super()._communicate_gen()

    def _fetch_gen(self, *, flush: bool) -> PQGen[None]:
        """Answers read before the block's end: the statements waiting are written first."""
        self._buffered()
        yield from super()._fetch_gen(flush=flush)

    def _buffered(self) -> None:
        """The statements waiting, in libpq's buffer, in their order: the next flush writes
        them all (libpq writes on its own only past 64 KB)."""
        queue = self.command_queue
        while queue:
            queue.popleft()()


@contextlib.contextmanager
def entered(connection: Any) -> Iterator[psycopg.Pipeline]:
    """`connection.pipeline()`, as psycopg's, with this module's `Pipeline`."""
    with connection.lock:
        connection._check_connection_ok()
        if (pipeline := connection._pipeline) is None:
            pipeline = connection._pipeline = Pipeline(connection)  # a loop, broken below
    try:
        with pipeline:
            yield pipeline
    finally:
        if pipeline.level == 0:
            with connection.lock:
                connection._pipeline = None
