"""What a short database call of the prompt path costs in CPU when 200 are made at once: the
hop to where it runs and back, and each statement in it (issue 21, item 1).

A short call runs as `database_sync_to_async` runs it, on a thread of the loop's pool
(foundation/database.py; on PostgreSQL a connection of Django's pool). Beside it, on PostgreSQL,
the same statement sent by psycopg's async connection from the loop itself (four connections
shared by the calls), what a call costs with no thread and no Django.
Medians of --runs rounds of 200 calls, in ms of this process's CPU a call.

Run: .venv/bin/python bench/db_calls.py [--runs 5]    (BENCH_DATABASE_URL=postgres://… for PG)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

import harness

harness.setup()  # Django on a throwaway database, before any project import

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from foundation.database import short  # noqa: E402
from sessions import store  # noqa: E402
from sessions.models import ChatSession  # noqa: E402

CALLS = 200
Call = Callable[[], Awaitable[object]]


async def cpu_a_call(call: Call, runs: int) -> float:
    await asyncio.gather(*(call() for _ in range(CALLS)))  # warm: connections, compiled SQL
    spent = []
    for _ in range(runs):
        started = time.process_time()
        await asyncio.gather(*(call() for _ in range(CALLS)))
        spent.append((time.process_time() - started) * 1000 / CALLS)
    return statistics.median(spent)


def calls(session_id: int) -> dict[str, Call]:
    def nothing() -> int:
        return 0

    def one() -> object:
        return store.kept_generation(session_id)

    def three() -> object:
        return one(), one(), one()

    empty, single, triple = (short(f) for f in (nothing, one, three))
    return {
        "a short call, no statement (the hop alone)": empty,
        "a short call, one statement": lambda: single(),
        "a short call, three statements": lambda: triple(),
    }


async def async_psycopg(session_id: int) -> dict[str, Call]:
    import psycopg

    url = os.environ["BENCH_DATABASE_URL"]
    free: asyncio.Queue[psycopg.AsyncConnection[tuple[object, ...]]] = asyncio.Queue()
    for _ in range(4):
        free.put_nowait(await psycopg.AsyncConnection.connect(url, autocommit=True))
    sql = "SELECT generation_channel FROM chat_chatsession WHERE id = %s AND deleted_at IS NULL"

    async def statements(count: int) -> None:
        held = await free.get()
        try:
            for _ in range(count):
                await (await held.execute(sql, [session_id])).fetchall()
        finally:
            free.put_nowait(held)

    return {
        "psycopg's async connection on the loop, one statement": lambda: statements(1),
        "psycopg's async connection on the loop, three statements": lambda: statements(3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    await asyncio.to_thread(call_command, "migrate", verbosity=0)
    owner = await asyncio.to_thread(User.objects.create_user, "calls")
    session = await asyncio.to_thread(ChatSession.objects.create, owner=owner, model="m")
    ways = calls(session.pk)
    if connection.vendor == "postgresql":
        ways |= await async_psycopg(session.pk)
    print(f"{connection.vendor}: CPU a call, {CALLS} at once (median of {args.runs})")
    for name, call in ways.items():
        print(f"  {await cpu_a_call(call, args.runs):6.3f} ms  {name}")


if __name__ == "__main__":
    asyncio.run(main())
