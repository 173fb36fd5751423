"""A person with many long sessions: the sidebar beside a session's page, and the session list
(which counts each session's messages and sums its usage), on SQLite or PostgreSQL.

Both list the owner's latest chains; what they read of each session listed is what grows
with the sessions' length.

Run: .venv/bin/python bench/many_sessions.py --sessions 15 --entries 10000 --runs 5
     (BENCH_POSTGRES=postgres://…/postgres for PostgreSQL)
"""

from __future__ import annotations

import argparse

import harness
from harness import warm_median_ms

harness.setup()  # a throwaway SQLite file, or a PostgreSQL database of its own

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from sessions import listing  # noqa: E402
from sessions.models import ChatSession, Entry  # noqa: E402


def fill(owner: User, sessions: int, entries: int) -> ChatSession:
    """`sessions` sessions of `entries` entries each, questions and paid replies; the last."""
    session = None
    for _ in range(sessions):
        session = ChatSession.objects.create(owner=owner, model="claude-sonnet-4-5")
        rows = [
            Entry(
                session=session,
                role="user" if i % 2 == 0 else "assistant",
                content=[{"type": "text", "text": f"step {i}"}],
                model="claude-sonnet-4-5" if i % 2 else "",
                input_tokens=100 if i % 2 else 0,
                output_tokens=50 if i % 2 else 0,
            ).derive()
            for i in range(entries)
        ]
        Entry.objects.bulk_create(rows, batch_size=2000)
    harness.analyzed()
    assert session is not None
    return session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=15)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("many", password="x")
    current = fill(owner, args.sessions, args.entries)
    print(
        f"{connection.vendor}: {args.sessions} sessions of {args.entries:,} entries, "
        f"median of {args.runs} (ms)"
    )
    sidebar = warm_median_ms(lambda: listing.recent_chains(owner, current), args.runs)
    listed = warm_median_ms(lambda: listing.chain_page(owner), args.runs)
    print(f"  {sidebar:8.1f}  the sidebar beside a session's page")
    print(f"  {listed:8.1f}  the session list, its counts and usage")


if __name__ == "__main__":
    main()
