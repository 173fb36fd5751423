"""Search behind many users' entries: a rare word and a common one, as the page searches them
(the newest entries that mention it, and the sessions listed), on SQLite or PostgreSQL.

A search is one user's, but the entry table is every user's: a plan that walks the table
(newest first, until it has a page of the searcher's matches) costs more with every other user.
The searcher here owns one entry in `--users`; the rare word is in one of their oldest
entries, the common one in half of everyone's.

Run: .venv/bin/python bench/search_scale.py --users 20 --entries 100000 --runs 5
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

from sessions import listing, search  # noqa: E402
from sessions.models import ChatSession, Entry  # noqa: E402

SESSION = 200  # entries a session
RARE, COMMON = "zanzibar", "build"


def fill(users: int, entries: int) -> User:
    """`entries` entries, `users` users' in turn by session; the searcher (the first user)."""
    owners = [User.objects.create_user(f"user{n}", password="x") for n in range(users)]
    for number in range(max(1, entries // SESSION)):
        session = ChatSession.objects.create(owner=owners[number % users], model="local")
        rows = [
            Entry(
                session=session,
                role="user" if i % 2 == 0 else "assistant",
                content=[{"type": "text", "text": _said(number, i)}],
            ).derive()
            for i in range(SESSION)
        ]
        Entry.objects.bulk_create(rows, batch_size=1000)
    harness.analyzed()
    return owners[0]


def _said(session: int, i: int) -> str:
    if session == 0 and i == 1:  # the searcher's first session, near its start
        return f"The {RARE} protocol times out after 30 s."
    common = f" and the {COMMON} passed" if i % 2 == 0 else ""
    return f"Step {i} of part {session}: edited src/module_{i}.py{common}."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    searcher = fill(args.users, args.entries)
    theirs = Entry.objects.filter(session__owner=searcher).count()
    print(
        f"{connection.vendor}: search behind {Entry.objects.count():,} entries of {args.users} "
        f"users (the searcher's {theirs:,}), median of {args.runs} (ms)"
    )
    found = search.find(searcher, RARE)
    assert len(found) == 1, f"the rare word is in one entry, found in {len(found)}"
    for word, which in ((RARE, "a rare word"), (COMMON, "a common word")):
        shown = warm_median_ms(lambda word=word: search.find(searcher, word), args.runs)
        listed = warm_median_ms(lambda word=word: list(listing.matching(searcher, word)), args.runs)
        print(f"  {shown:8.1f}  {which}: the entries shown")
        print(f"  {listed:8.1f}  {which}: the sessions listed")


if __name__ == "__main__":
    main()
