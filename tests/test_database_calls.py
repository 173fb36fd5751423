"""A prompt is checked and taken beside the process's other database work, not in line behind it
on the one database thread: by `database_sync_to_async` on a thread of the loop's pool
(`foundation.database.short`), never stalling the loop for a lock (SQLite's write lock,
PostgreSQL's row locks)."""

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
from django.db import DataError, connection

from foundation.database import short
from sessions.models import ChatSession, Entry

from .conftest import db_async, direct_params, make_session
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


async def test_on_postgresql_more_calls_than_the_pool_each_get_their_own_answer():
    """Thirty calls at once, a few failing, on the pool's connections: each caller gets its own
    answer or its own error, and the connections serve the calls after them."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no pool")
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
    holder = psycopg.connect(**direct_params(connection))
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
