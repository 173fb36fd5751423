"""How many database round trips does a prompt make? (issue 21, item 1)

Counts every statement the process sends to the database (and the transactions among them)
from the moment a prompt frame arrives to the first delta the tab receives, and from there to
the reply's last frame, for a session's first prompt and for a later one. Each statement is
listed with the code that sent it, so the prompt path's queries can be read one by one.

It also times the process's CPU from the frame to the first delta, one prompt at a time: what
200 prompts at once queue behind (the fake API and the test client run in this process too,
so it is an upper bound of the server's own share).

Run: .venv/bin/python bench/prompt_queries.py [--runs 5] [--list]
     (BENCH_DATABASE_URL=postgres://… for PostgreSQL)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

import harness

harness.setup()  # Django on a throwaway database, before any project import

from django.db import DEFAULT_DB_ALIAS, connection, connections  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402
from harness import fake_api, open_tab, signed_in_user  # noqa: E402

from sessions import generation  # noqa: E402
from tests.fake_anthropic import Reply  # noqa: E402


@dataclass
class Tally:
    """The statements sent while it counts, each with where in agentweb it came from."""

    counting: bool = False
    statements: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, execute, sql, params, many, context):  # a connection's execute wrapper
        self.note(sql.split()[0].upper(), _caller())
        return execute(sql, params, many, context)

    def note(self, verb: str, where: str) -> None:
        if self.counting:
            with self.lock:
                self.statements.append((verb, where))

    def take(self) -> list[tuple[str, str]]:
        with self.lock:
            taken, self.statements = self.statements, []
        return taken


def _caller() -> str:
    """The innermost frame of agentweb's own code that led to the statement (past the compiled
    statements' runner: the code that ran it)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename.startswith(OURS) and frame.filename != RUNNER:
            return f"{frame.filename[len(str(harness.ROOT)) + 1 :]}:{frame.lineno} {frame.name}"
    return "(outside agentweb: Django's sign-in session)"


OURS = str(harness.ROOT / "sessions") + "/"
RUNNER = str(harness.ROOT / "sessions" / "statements.py")


TALLY = Tally()


def _wrap(sender, connection, **kwargs) -> None:
    if TALLY not in connection.execute_wrappers:
        connection.execute_wrappers.append(TALLY)


connection_created.connect(_wrap)


def _count_health_checks() -> None:
    """Django's health check of a kept connection is a statement too (`SELECT 1`, sent past the
    execute wrappers): counted where the backend makes it."""
    backend = type(connections[DEFAULT_DB_ALIAS])
    is_usable = backend.is_usable

    def counted(self):  # noqa: ANN001, ANN202
        if self.vendor == "postgresql":
            TALLY.note("SELECT", "(Django's health check of a kept connection)")
        return is_usable(self)

    backend.is_usable = counted


_count_health_checks()


def transactions(statements: list[tuple[str, str]]) -> int:
    """The transactions among them: each BEGIN or SAVEPOINT (SQLite's and PostgreSQL's Django
    both open one so) — a statement outside any is its own."""
    return sum(1 for verb, _ in statements if verb in ("BEGIN", "SAVEPOINT"))


async def one_prompt(user, cookie, fake, *, later: bool) -> tuple[list, list, float]:
    """The statements of one prompt: before its first delta, and after it to the reply's end;
    and the CPU milliseconds to its first delta."""
    tab = await open_tab(user, cookie)
    await tab.receive_from(5)
    if later:  # a session with an exchange already: the usual prompt
        fake.enqueue(Reply(chunks=["first answer"]))
        await tab.send_to(text_data=json.dumps({"message": "first"}))
        while "entry--assistant status--complete" not in await tab.receive_from(10):
            pass
        await generation.wait_idle()
    fake.enqueue(Reply(chunks=[f"t{i} " for i in range(20)]))
    TALLY.take()
    TALLY.counting = True
    started = time.process_time()
    await tab.send_to(text_data=json.dumps({"message": "bench"}))
    before: list = []
    cpu = 0.0
    while True:
        html = await tab.receive_from(10)
        if 'id="live-text" hx-swap-oob="beforeend"' in html and not before:
            cpu = (time.process_time() - started) * 1000
            before = TALLY.take() or [("(none)", "")]
        if "entry--assistant status--complete" in html:
            break
    await generation.wait_idle()
    TALLY.counting = False
    after = TALLY.take()
    await tab.disconnect()
    return before, after, cpu


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--list", action="store_true", help="list each statement's caller")
    args = parser.parse_args()
    user, cookie = await signed_in_user()
    fake = fake_api()
    print(f"{connection.vendor}: database statements of one prompt ({args.runs} runs, medians)")
    for later in (False, True):
        runs = [await one_prompt(user, cookie, fake, later=later) for _ in range(args.runs)]
        before = statistics.median(len(b) for b, _, _ in runs)
        after = statistics.median(len(a) for _, a, _ in runs)
        begun = statistics.median(transactions(b) for b, _, _ in runs)
        cpu = statistics.median(ms for _, _, ms in runs)
        name = "a later prompt" if later else "a first prompt"
        # PostgreSQL's BEGIN is psycopg's, not a statement Django sends: counted on SQLite only.
        begins = f" ({begun:.0f} transactions)" if connection.vendor == "sqlite" else ""
        print(
            f"  {name}: {before:.0f} statements{begins} from the frame to the first delta, "
            f"{after:.0f} from there to the reply's end; CPU to the first delta {cpu:.1f} ms"
        )
        if args.list:
            first, rest, _ = runs[-1]
            for title, statements in (("before the first delta", first), ("after", rest)):
                print(f"    {title}:")
                for (verb, where), count in Counter(statements).most_common():
                    print(f"      {count:3} × {verb:9} {where}")
    fake.stop()


if __name__ == "__main__":
    asyncio.run(main())
