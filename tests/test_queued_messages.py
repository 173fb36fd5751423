"""Queued messages (issue 56, rough edge 9): a message sent while a reply runs is shown above
the message box, in every tab, where it can be edited or removed until the reply ends and it
is sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from sessions import generation
from sessions.models import ChatSession, PendingPrompt

from .conftest import db_async, direct_params, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_a_queued_message_is_shown_edited_and_sent_as_edited(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held(["Working"]), Reply.text("About the tests."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, other = await open_tab(owner, session)
    await tab.send(message="first")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(message="and then the docs")
    shown = await other.until("Queued: sent when the reply ends")  # every tab shows it
    assert '<span class="plain queue-text">and then the docs</span>' in shown
    [queued] = await db_async(lambda: list(PendingPrompt.objects.filter(session=session)))()
    await tab.send(action="queue_edit", entry=queued.pk, message="and then the tests")
    assert "and then the tests</span>" in await other.until("and then the tests</span>")
    fake_anthropic.release()
    await tab.until("About the tests.")
    await generation.wait_idle()
    asked = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][-1]["text"]
    assert asked == "and then the tests"
    assert '<section id="queue" class="queue" hx-swap-oob="true" hidden></section>' in (
        "".join(tab.received)
    )  # the queue is empty again


async def test_a_removed_message_is_never_sent(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held(["Working"]))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(message="never mind this")
    await tab.until("never mind this</span>")
    [queued] = await db_async(lambda: list(PendingPrompt.objects.filter(session=session)))()
    await tab.send(action="queue_remove", entry=queued.pk)
    await tab.until('<section id="queue" class="queue" hx-swap-oob="true" hidden></section>')
    fake_anthropic.release()
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 1
    assert not await db_async(PendingPrompt.objects.exists)()
    # Removing it again, or another session's, is refused in words.
    await tab.send(action="queue_remove", entry=queued.pk)
    said = await tab.until("no longer queued")
    assert "That message is no longer queued: it was sent or removed." in said


@contextlib.asynccontextmanager
async def releases_held_back(seconds: float) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """On PostgreSQL, a job's release of its claim is held for `seconds` once the row is locked
    (a trigger sleeps in it), as a moment's contention on the session's row holds it: the
    statement's snapshot is taken, its lock not yet. Yields a connection of the test's own."""
    table = ChatSession._meta.db_table
    direct = await psycopg.AsyncConnection.connect(**direct_params(connection), autocommit=True)
    await direct.execute(
        "CREATE FUNCTION held_release() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"PERFORM pg_sleep({seconds}); RETURN NEW; END $$"
    )
    await direct.execute(
        f"CREATE TRIGGER held_release BEFORE UPDATE ON {table} FOR EACH ROW "
        "WHEN (OLD.generation_id <> '' AND NEW.generation_id = '') "
        "EXECUTE FUNCTION held_release()"
    )
    try:
        yield direct
    finally:
        await direct.execute(f"DROP TRIGGER held_release ON {table}")
        await direct.execute("DROP FUNCTION held_release()")
        await direct.close()


async def until_sleeping(direct: psycopg.AsyncConnection[Any]) -> None:
    """Until a statement of the server waits in the trigger's sleep."""
    async with asyncio.timeout(10):
        while not await (
            await direct.execute("SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
        ).fetchone():
            await asyncio.sleep(0.01)


async def test_a_message_queued_as_the_reply_gives_its_claim_up_is_sent(
    owner, fake_anthropic, open_tab
):
    """The reply's end releases its claim when no prompt waits, in one statement whose view of
    the queue is taken before its lock: a message queued in between, whose own claim still met
    the reply's, is sent all the same (it stayed queued for good before)."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time: its release reads and writes at once")
    fake_anthropic.enqueue(Reply.text("Read it."), Reply.text("Again."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    async with releases_held_back(2) as direct:
        await tab.send(message="Summarise it.")
        await until_sleeping(direct)  # the release has read the queue, empty, and waits
        await tab.send(message="And now?")
        await tab.until("Queued: sent when the reply ends")
        await tab.until("Again.</p>", timeout=15)
    await generation.wait_idle()
    asked = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][-1]["text"]
    assert asked == "And now?"
    assert not await db_async(PendingPrompt.objects.exists)()
