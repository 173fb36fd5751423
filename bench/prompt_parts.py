"""What each part of a prompt's set-up costs, timed alone (issue 21, item 1).

With 200 prompts at once, every prompt's set-up runs on the one database thread and the one
event loop of the process, so the first deltas wait for the sum of them all. This times each
part by itself, on a throwaway SQLite database (or BENCH_DATABASE_URL), as the prompt path
calls it: the per-frame check, the caps, the claim (alone, and with the frame's check in its
statement, as a prompt makes it once its sign-in held), the claimed session, the prompt stored,
the status line, the todo list and mentions read, and the three renders that go to the tab
before the reply's first delta. Medians of --runs calls each, in microseconds.

Run: .venv/bin/python bench/prompt_parts.py [--runs 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

import harness

harness.setup()  # Django on a throwaway database, before any project import

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from harness import cookie_for  # noqa: E402

from sessions import sign_ins, status, todos  # noqa: E402
from sessions.generation import caps, claims, turns  # noqa: E402
from sessions.generation.events import EntryAdded, Live, StatusShown  # noqa: E402
from sessions.models import ChatSession  # noqa: E402
from sessions.partials.events import render  # noqa: E402
from sessions.recall import offered  # noqa: E402
from sessions.sign_ins import Held  # noqa: E402
from sessions.statements import Returning  # noqa: E402

TEXT = [{"type": "text", "text": "stream please"}]


def timed(runs: int, call: Callable[[int], object]) -> float:
    call(0)  # the first run compiles what it compiles
    spent = []
    for n in range(runs):
        started = time.perf_counter()
        call(n)
        spent.append((time.perf_counter() - started) * 1e6)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    call_command("migrate", verbosity=0)
    user = User.objects.create_user("parts")
    cookie = cookie_for(user)
    made = [ChatSession(owner=user, model="claude-bench") for _ in range(runs + 2)]
    sessions = ChatSession.objects.bulk_create(made)
    one = sessions[0]

    def checked(session: ChatSession) -> None:
        standing = sign_ins.holds_beside(cookie, user.pk, session.pk)
        assert standing == (True, "")  # signed in, kept, idle

    def claim_and_release(n: int) -> None:
        generation = uuid.uuid4().hex
        claims.claim(one.pk, generation, "prompt", "channel")
        claims.release(one.pk, generation)

    def claim_free_and_release(taking: Returning[ChatSession], *held: Held) -> None:
        generation = uuid.uuid4().hex  # a prompt's own claim (`held`: the check in it)
        claims.claim_free(taking, one.pk, generation, "p", "c", *held)
        claims.release(one.pk, generation)

    checked(one)  # the sign-in has held once (as at a socket's connect)
    held = sign_ins.held(cookie, user.pk)
    assert held is not None
    line = StatusShown(one, status.read(one, queued=0))
    message = one.append_message("user", TEXT, data={})
    parts: list[tuple[str, Callable[[int], object]]] = [
        ("the frame's check: the sign-in holds, the session is kept", lambda n: checked(one)),
        ("the caps (a generation of the owner's, this one's)", lambda n: over_a_cap(one)),
        ("the claim taken and released", claim_and_release),
        (
            "a prompt's claim taken and released",
            lambda n: claim_free_and_release(turns.CLAIMED_IF_FREE),
        ),
        (
            "the same with the frame's check in it",
            lambda n: claim_free_and_release(turns.CLAIMED_IF_FREE_AND_HELD, held),
        ),
        ("the claimed session, its queue and threshold", lambda n: turns._as_claimed(one.pk)),
        ("the prompt stored (a session's first)", lambda n: _stored(sessions[n + 1])),
        ("the status line read", lambda n: status.read(one, queued=0)),
        ("the todo list's notes due", lambda n: todos.notes_due(one)),
        ("the tools offered (recall: mentions read)", lambda n: offered(one)),
        ("render: the status line", lambda n: render(line)),
        ("render: the prompt's entry", lambda n: render(EntryAdded(one, message, False))),
        ("render: the reply's live card", lambda n: render(Live("", "", ""))),
    ]
    print(f"{connection.vendor}: a prompt's set-up, part by part (median of {runs}, µs)")
    total = 0.0
    for name, call in parts:
        spent = timed(runs, call)
        total += spent
        print(f"  {spent:8.0f}  {name}")
    print(f"  {total:8.0f}  in all")


def over_a_cap(session: ChatSession) -> str:
    return caps.over_a_cap(session, queueing=True)


def _stored(session: ChatSession) -> None:
    session.append_message("user", TEXT, data={})


if __name__ == "__main__":
    main()
