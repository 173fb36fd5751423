"""A large fork beside another user's writes: how long the fork takes, and how long the other
user's renames wait while it runs (issue 18, item 1: each under one second).

In one run: a session of `--entries` entries (text with searchable words, as an imported
session has), forked from its last entry in one thread while another user renames their own
session every 100 ms in another. Reports the fork's time and the renames' median and worst
latency during it; BENCH_DATABASE_URL=postgres://… runs it on PostgreSQL.

Run: .venv/bin/python bench/fork_stall.py --entries 20000
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import harness

harness.setup()  # a throwaway SQLite file, or BENCH_DATABASE_URL

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

from sessions.models import ChatSession, Entry  # noqa: E402


def big_session(owner: User, size: int) -> ChatSession:
    session = ChatSession.objects.create(owner=owner, model="local")
    text = "Step {i}: edited `src/app/module_{m}.py` and ran the tests; the build passed. "
    rows = [
        Entry(
            session=session,
            role="user" if i % 2 == 0 else "assistant",
            content=[{"type": "text", "text": text.format(i=i, m=i % 300) * 4}],
        ).derive()
        for i in range(size)
    ]
    return harness.chained(session, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    User.objects.filter(username__in=["forker", "bystander"]).delete()
    forker = User.objects.create_user("forker")
    bystander = User.objects.create_user("bystander")
    session = big_session(forker, args.entries)
    theirs = ChatSession.objects.create(owner=bystander, model="local")
    connections.close_all()
    done = threading.Event()
    took: list[float] = []

    def fork() -> None:
        start = time.perf_counter()
        session.fork(session.leaf_id or 0)
        took.append(time.perf_counter() - start)
        done.set()
        connection.close()

    waits: list[float] = []
    thread = threading.Thread(target=fork)
    thread.start()
    time.sleep(0.1)  # the fork is under way
    n = 0
    while not done.is_set():
        start = time.perf_counter()
        ChatSession.objects.get(pk=theirs.pk).rename(f"Renamed {n}")
        waits.append(time.perf_counter() - start)
        n += 1
        time.sleep(0.1)
    thread.join()
    if not waits:
        print(
            f"{connection.vendor}, fork of {args.entries:,} entries: {took[0]:.2f} s; it ended "
            "before any rename by another user began (0 renames by another user meanwhile)"
        )
        return
    print(
        f"{connection.vendor}, fork of {args.entries:,} entries: {took[0]:.2f} s; "
        f"{len(waits)} renames by another user meanwhile: median "
        f"{statistics.median(waits) * 1000:.0f} ms, worst {max(waits) * 1000:.0f} ms "
        "(target: under 1,000 ms)"
    )


if __name__ == "__main__":
    main()
