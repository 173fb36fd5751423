"""How the session page, side by side and the handoff switch grow with a session's size.

For sessions of 10, 1,000 and 10,000 entries, medians of: the session page, side by side
(its first visit, after the session page: the coverage report computed, the messages' HTML
already rendered once by the process; with the report cached; and in a process that has
rendered none of them) and the handoff switch after the document,
with their query counts, and a socket's catch-up when it connects with nothing new (what
every open tab does on reconnect). The process's collector is set as the server sets its own
(`foundation.interpreter.settle`, which asgi.py calls at start-up): with Python's default, reading
a branch of 10,000 entries set off a full collection every other time, which no server runs.
Targets (issue 10): page and side by side < 300 ms at 10,000 entries with a constant query
count; the switch < 100 ms at 10,000, growing no faster than linearly.

Run: .venv/bin/python bench/sizes.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics

import harness
from harness import median_seconds, time_switches

harness.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from foundation.interpreter import settle  # noqa: E402
from sessions import handoff, rendering  # noqa: E402
from sessions.models import ChatSession, Entry  # noqa: E402
from sessions.partials import catch_up  # noqa: E402

DOCUMENT = "\n\n".join(f"## {name}\nsrc/app/module_7.py" for name in handoff.SECTIONS)


def long_session(user: User, size: int) -> ChatSession:
    """A session of `size` chat entries with markdown, paths and code, written in bulk."""
    session = ChatSession.objects.create(owner=user, model="local")
    text = "Message {i} about `src/app/module_{m}.py`, **bold** and a [link](https://x.example) "
    rows = [
        Entry(
            session=session,
            role="user" if i % 2 == 0 else "assistant",
            content=[{"type": "text", "text": text.format(i=i, m=i % 300) * 3}],
            items=[],
        )
        for i in range(size)
    ]
    return harness.chained(session, rows)


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return len(captured)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="10,1000,10000")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    settle()  # as the server's process does at start-up
    settings.ALLOWED_HOSTS = ["*"]
    user = User.objects.create_user("sizes")
    client = Client()
    client.force_login(user)
    print(f"{args.runs} runs each, medians (SQLite):")
    for size in (int(value) for value in args.sizes.split(",")):
        print(f"  {size:6,} entries: {measure(client, long_session(user, size), args.runs)}")
    print(
        "  targets: page and side by side < 300 ms at 10,000 entries, the same query count at "
        "every size; switch < 100 ms at 10,000, growing no faster than linearly"
    )


def measure(client: Client, session: ChatSession, runs: int) -> str:
    page = session.get_absolute_url()
    client.get(page)
    page_s = median_seconds(lambda: client.get(page), runs)
    switches = time_switches(session, DOCUMENT, runs)
    new = ChatSession.objects.filter(parent_session=session).latest("pk")
    compare = f"/sessions/{session.pk}/compare/{new.pk}/"

    def cold() -> None:
        cache.clear()
        client.get(compare)

    compare_s = median_seconds(cold, runs)

    def fresh() -> None:  # as a process that has rendered none of these messages yet
        cache.clear()
        rendering.render_markdown.cache_clear()
        client.get(compare)

    fresh_s = median_seconds(fresh, runs)
    client.get(compare)
    warm_s = median_seconds(lambda: client.get(compare), runs)
    catch_up_s = median_seconds(lambda: catch_up.state(session.pk, session.leaf_id or 0), runs)
    return (
        f"page {page_s * 1000:6.1f} ms ({queries(client, page)} queries)  "
        f"side by side {compare_s * 1000:6.1f} ms ({queries(client, compare)} queries), "
        f"report cached {warm_s * 1000:6.1f} ms, in a fresh process {fresh_s * 1000:6.1f} ms  "
        f"switch {statistics.median(switches) * 1000:5.1f} ms  "
        f"socket catch-up {catch_up_s * 1000:5.1f} ms"
    )


if __name__ == "__main__":
    main()
