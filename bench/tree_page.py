"""The tree page of a long linear session: its time and size (issue 18, item 8: it pages).

Run: .venv/bin/python bench/tree_page.py --entries 99000
"""

from __future__ import annotations

import argparse
import statistics
import time

import harness

harness.setup()  # Django on a throwaway database, before any project import

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from sessions.models import ChatSession, Entry  # noqa: E402


def linear_session(owner: User, size: int) -> ChatSession:
    session = ChatSession.objects.create(owner=owner, model="local")
    rows = [
        Entry(
            session=session,
            role="user",
            content=[{"type": "text", "text": f"step {i}"}],
            search_text=f"step {i} of a long session with words",
        )
        for i in range(size)
    ]
    return harness.chained(session, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=99_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = User.objects.create_user("tree")
    session = linear_session(user, args.entries)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    times, size = [], 0
    for _ in range(args.runs):
        start = time.perf_counter()
        response = client.get(f"/sessions/{session.pk}/tree/")
        times.append(time.perf_counter() - start)
        size = len(response.content)
    print(
        f"tree page of {args.entries:,} entries: median {statistics.median(times) * 1000:.0f} ms, "
        f"{size / 1024:.0f} KB of HTML"
    )


if __name__ == "__main__":
    main()
