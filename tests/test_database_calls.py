"""A prompt is checked and taken beside the process's other database work, not in line behind it
on the one database thread (issue 21): on the event loop's own thread, on a connection of its
own, and never stalling the loop for a lock (SQLite's write lock, PostgreSQL's row locks)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from channels.db import database_sync_to_async
from django.db import DataError, connection, transaction

from sessions.database import close_connections, short
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def stored(session_id: int, text: str, patience: float = 10.0) -> bool:
    """Whether the user message `text` is stored in the session before `patience` runs out,
    read on a connection of this thread's own."""
    try:
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if Entry.objects.filter(session_id=session_id, content__0__text=text).exists():
                return True
            time.sleep(0.02)
        return False
    finally:
        connection.close()


async def test_a_prompt_is_taken_while_the_database_thread_is_busy(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Answered."))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    busy = threading.Event()
    holding = asyncio.ensure_future(database_sync_to_async(busy.wait)(30))  # the one thread
    try:
        await tab.send(message="taken beside the busy thread")
        assert await asyncio.to_thread(stored, session.pk, "taken beside the busy thread")
    finally:
        busy.set()
        await holding
    assert "Answered." in await tab.until("Answered.")


async def test_on_postgresql_every_wait_may_be_handed_to_the_loop(
    owner, fake_anthropic, open_tab, settings
):
    """AGENTWEB_PG_WAIT_IN_LINE_SECONDS=0, for a database across a network: each of a call's
    waits for the server is the loop's, and the prompt, its reply and the next prompt all go
    through as before."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's calls make no round trips")
    settings.AGENTWEB_PG_WAIT_IN_LINE_SECONDS = 0
    fake_anthropic.enqueue(Reply.text("First, handed over."), Reply.text("Second, handed over."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    await tab.send(message="the first question")
    assert "First, handed over." in await tab.until("First, handed over.")
    await tab.send(message="the second question")
    assert "Second, handed over." in await tab.until("Second, handed over.")
    assert await asyncio.to_thread(stored, session.pk, "the second question")


async def test_on_sqlite_a_prompt_waits_for_another_writer_without_stalling_other_tabs(
    owner, fake_anthropic, open_tab
):
    """SQLite's own wait for a lock is 5 s: the loop never waits for it."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has no database-wide write lock")
    await a_prompt_waits_for_the_lock_while_other_tabs_are_served(
        owner, fake_anthropic, open_tab, another_writer
    )


async def test_on_sqlite_a_frames_check_reads_while_another_connection_writes(owner, open_tab):
    """The check before each frame only reads: it takes no write lock, so neither another
    writer nor the busy database thread holds it up."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has no database-wide write lock")
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    thread_free = threading.Event()
    holding = asyncio.ensure_future(database_sync_to_async(thread_free.wait)(30))  # the one thread
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        await tab.send(action="cancel")
        assert "Nothing is running." in await tab.until("Nothing is running.", timeout=3)
    finally:
        writer.execute("COMMIT")
        writer.close()
        thread_free.set()
        await holding


async def test_on_postgresql_a_prompt_waits_for_a_locked_row_without_stalling_other_tabs(
    owner, fake_anthropic, open_tab
):
    """The prompt's call runs on the event loop's thread, and waits for a row another
    connection holds: the loop serves the other tabs meanwhile."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's lock is the database's: the test above")
    await a_prompt_waits_for_the_lock_while_other_tabs_are_served(
        owner, fake_anthropic, open_tab, its_row_held
    )


async def test_on_postgresql_more_calls_than_connections_each_get_their_own_answer(settings):
    """Thirty calls at once, a few failing, on the few connections kept for calls: each caller
    gets its own answer or its own error, and the connections serve the calls after them."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's calls make no round trips")
    settings.AGENTWEB_PG_WAIT_IN_LINE_SECONDS = 5
    statements = [
        "SELECT 1 / 0" if n % 7 == 3 else f"SELECT {n} FROM pg_sleep(0.01)" for n in range(30)
    ]
    answers = await asyncio.gather(
        *[short(one_value)(statement) for statement in statements], return_exceptions=True
    )
    for n, answer in enumerate(answers):
        if n % 7 == 3:
            assert isinstance(answer, DataError) and "division by zero" in str(answer)
        else:
            assert answer == n
    assert await short(one_value)("SELECT 'after'") == "after"


async def test_on_postgresql_a_call_answered_in_line_ends_in_the_callers_own_step(settings):
    """A call whose answers come within the wait in line goes on in its caller's own step of the
    loop: nothing else runs between its start and its end (under load a Cancel's frame check
    waited two turns of the busy loop for it). A call that waits past it lets the loop serve
    the others meanwhile."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's calls make no round trips")
    settings.AGENTWEB_PG_WAIT_IN_LINE_SECONDS = 0.2
    assert await short(one_value)("SELECT 'a connection made'") == "a connection made"
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "another task's step")
    assert await short(one_value)("SELECT 'answered in line'") == "answered in line"
    assert ran == []
    failing = short(one_value)("SELECT 1 / 0")
    with pytest.raises(DataError, match="division by zero"):
        await failing
    assert ran == []
    answer = await short(one_value)("SELECT 'answered late' FROM pg_sleep(0.5)")
    assert answer == "answered late"
    assert ran == ["another task's step"]
    assert await short(one_value)("SELECT 'and after'") == "and after"


async def test_on_postgresql_a_call_that_connects_waits_in_line_for_the_new_servers_first_answers(
    settings,
):
    """A new server process answers its first statements slowly (its caches empty, its
    statements unplanned): the call that opened the connection waits for them in line, where
    handing the wait to the loop spread a burst of prompts over every connection the loop may
    open, each as slow at first. Once connected, a wait past the setting is the loop's."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's calls make no round trips")
    settings.AGENTWEB_PG_WAIT_IN_LINE_SECONDS = 0.005
    assert await short(one_value)("SELECT 'a connection kept'") == "a connection kept"
    await asyncio.to_thread(close_connections)  # closed: the next call opens it again
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "a step during the first call")
    first = await short(one_value)("SELECT 'connected, answered in line' FROM pg_sleep(0.02)")
    assert first == "connected, answered in line"
    assert ran == []
    asyncio.get_running_loop().call_soon(ran.append, "a step during the second call")
    second = await short(one_value)("SELECT 'answered late' FROM pg_sleep(0.02)")
    assert second == "answered late"
    assert ran == ["a step during the first call", "a step during the second call"]


async def test_on_postgresql_a_call_its_loop_left_waiting_keeps_neither_its_connection_nor_its_lock(
    owner,
):
    """A loop that closes while a call waits for the server (a process's shutdown, each test's
    end) stops the call: the server lets go of the row it locked, and the thread's next call
    is answered, not left waiting for a connection the stopped call still held."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's calls never wait midway")
    session = await db_async(make_session)(owner)
    answers: list[str] = []

    async def left_waiting() -> None:
        asyncio.ensure_future(short(lock_then_sleep)(session.pk))
        await asyncio.sleep(0.5)  # the call has locked the row and waits for the server

    async def the_next_call() -> str:
        return await short(one_value)("SELECT 'the next call'")  # type: ignore[no-any-return]

    def two_loops_one_after_the_other() -> None:
        asyncio.run(left_waiting())
        answers.append(asyncio.run(the_next_call()))

    thread = threading.Thread(target=two_loops_one_after_the_other, daemon=True)
    thread.start()
    await asyncio.to_thread(thread.join, 10)
    assert answers == ["the next call"]
    assert await asyncio.to_thread(locked_at_once, session)


def lock_then_sleep(session_id: int) -> None:
    with transaction.atomic():
        ChatSession.objects.select_for_update().get(pk=session_id)
        one_value("SELECT 1 FROM pg_sleep(30)")


def locked_at_once(session: ChatSession) -> bool:
    """Whether another connection locks the session's row within a second."""
    params = connection.get_connection_params()
    keys = ("dbname", "user", "host", "port")
    with psycopg.connect(**{key: params[key] for key in keys}) as other:
        other.execute("SET lock_timeout = '1s'")
        table = ChatSession._meta.db_table
        try:
            other.execute(f'SELECT id FROM "{table}" WHERE id = %s FOR UPDATE', [session.pk])
        except psycopg.errors.LockNotAvailable:
            return False
        return True


def one_value(statement: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(statement)
        return cursor.fetchone()[0]


@contextlib.contextmanager
def another_writer(session: ChatSession) -> Iterator[None]:
    """SQLite's write lock, held by another connection."""
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        writer.execute("COMMIT")
        writer.close()


@contextlib.contextmanager
def its_row_held(session: ChatSession) -> Iterator[None]:
    """The session's row, locked by another connection (PostgreSQL)."""
    params = connection.get_connection_params()
    holder = psycopg.connect(**{key: params[key] for key in ("dbname", "user", "host", "port")})
    table = ChatSession._meta.db_table
    holder.execute(f'SELECT id FROM "{table}" WHERE id = %s FOR UPDATE', [session.pk])
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


async def a_prompt_waits_for_the_lock_while_other_tabs_are_served(
    owner, fake_anthropic, open_tab, lock: Callable[[ChatSession], Any]
) -> None:
    """A prompt sent while `lock(session)` holds what its call needs is stored and answered
    once it is let go; meanwhile another tab's frame is answered at once."""
    fake_anthropic.enqueue(Reply.text("Answered after the lock."))
    session = await db_async(make_session)(owner, exchanges=1)
    elsewhere = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, bystander = await open_tab(owner, elsewhere)
    await tab.until('id="status"')
    await bystander.until('id="status"')
    with lock(session):
        held_since = time.monotonic()
        await tab.send(message="sent while another connection holds the lock")
        await asyncio.sleep(0.3)  # the prompt meets the lock meanwhile
        await bystander.ws.send_to(text_data="{not json")
        refused = await bystander.until("Malformed message", timeout=4)
        assert time.monotonic() - held_since < 2
        assert "Malformed message: not valid JSON." in refused
        waiting = await asyncio.to_thread(
            stored, session.pk, "sent while another connection holds the lock", 0.2
        )
        assert not waiting
    assert "Answered after the lock." in await tab.until("Answered after the lock.")
    assert await asyncio.to_thread(
        stored, session.pk, "sent while another connection holds the lock"
    )
