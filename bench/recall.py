"""`recall` over a chain of handoffs: 5 sessions of 2,000 entries each, a query whose answer is
in the oldest (issue 19: under 200 ms, median, on SQLite and PostgreSQL).

Run: .venv/bin/python bench/recall.py --sessions 5 --entries 2000 --runs 9
     (BENCH_DATABASE_URL=postgres://… for PostgreSQL)
"""

from __future__ import annotations

import argparse
import statistics
import time

import harness

harness.setup()  # a throwaway SQLite file, or BENCH_DATABASE_URL

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from sessions.agent.recall_tool import look_up  # noqa: E402
from sessions.models import ChatSession, Entry  # noqa: E402


def chain(owner: User, sessions: int, size: int) -> ChatSession:
    """`sessions` sessions, each handed off from the one before; the last one."""
    previous: ChatSession | None = None
    for part in range(sessions):
        session = ChatSession.objects.create(
            owner=owner, model="local", parent_session=previous, part=part + 1
        )
        words = "edited `src/module_{i}.py` and the build of part {p} passed"
        rows = [
            Entry(
                session=session,
                role="user" if i % 2 == 0 else "assistant",
                content=[{"type": "text", "text": f"Step {i}: " + words.format(i=i, p=part)}],
            ).derive()
            for i in range(size)
        ]
        if part == 0:
            rows[size // 2].content = [{"type": "text", "text": "The zanzibar key is K-77."}]
            rows[size // 2].derive()
        Entry.objects.bulk_create(rows, batch_size=1000)
        previous = session
    assert previous is not None
    return previous


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    User.objects.filter(username="recaller").delete()
    owner = User.objects.create_user("recaller")
    last = chain(owner, args.sessions, args.entries)
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        result = look_up({"query": "zanzibar key"}, last)
        times.append(time.perf_counter() - start)
    assert "K-77" in result.text, result.text
    print(
        f"{connection.vendor}, recall over "
        f"{args.sessions} sessions of {args.entries:,} entries: median "
        f"{statistics.median(times) * 1000:.1f} ms (target: under 200 ms)"
    )


if __name__ == "__main__":
    main()
