"""A prompt is checked and taken beside the process's other database work, not in line behind it
on the one database thread (issue 21): on the event loop's own thread, on a connection of its
own, and never stalling the loop for a lock (SQLite's write lock, PostgreSQL's row locks)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import psycopg
import pytest
from channels.db import database_sync_to_async
from django.db import connection

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


async def test_on_sqlite_a_prompt_waits_for_another_writer_without_stalling_other_tabs(
    owner, fake_anthropic, open_tab
):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has no database-wide write lock")
    fake_anthropic.enqueue(Reply.text("Answered after the writer."))
    session = await db_async(make_session)(owner, exchanges=1)
    elsewhere = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, bystander = await open_tab(owner, elsewhere)
    await tab.until('id="status"')
    await bystander.until('id="status"')
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another connection holds the write lock
    try:
        held_since = time.monotonic()
        await tab.send(message="sent while another connection writes")
        await asyncio.sleep(0.3)  # the prompt meets the lock meanwhile
        await bystander.ws.send_to(text_data="{not json")
        refused = await bystander.until("Malformed message", timeout=4)
        # SQLite's own wait for a lock is 5 s: the loop never waited for it.
        assert time.monotonic() - held_since < 2
        assert "Malformed message: not valid JSON." in refused
        waiting = await asyncio.to_thread(
            stored, session.pk, "sent while another connection writes", 0.2
        )
        assert not waiting
    finally:
        writer.execute("COMMIT")
        writer.close()
    assert "Answered after the writer." in await tab.until("Answered after the writer.")
    assert await asyncio.to_thread(stored, session.pk, "sent while another connection writes")


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
    connection holds: the loop serves the other tabs meanwhile, and the prompt goes on when
    the lock is let go."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's lock is the database's: the test above")
    fake_anthropic.enqueue(Reply.text("Answered after the lock."))
    session = await db_async(make_session)(owner, exchanges=1)
    elsewhere = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, bystander = await open_tab(owner, elsewhere)
    await tab.until('id="status"')
    await bystander.until('id="status"')
    params = connection.get_connection_params()
    holder = psycopg.connect(**{key: params[key] for key in ("dbname", "user", "host", "port")})
    table = ChatSession._meta.db_table
    holder.execute(f'SELECT id FROM "{table}" WHERE id = %s FOR UPDATE', [session.pk])
    try:
        held_since = time.monotonic()
        await tab.send(message="sent while another connection holds its session")
        await asyncio.sleep(0.3)  # the prompt's claim meets the lock meanwhile
        await bystander.ws.send_to(text_data="{not json")
        refused = await bystander.until("Malformed message", timeout=4)
        assert time.monotonic() - held_since < 2
        assert "Malformed message: not valid JSON." in refused
        waiting = await asyncio.to_thread(
            stored, session.pk, "sent while another connection holds its session", 0.2
        )
        assert not waiting
    finally:
        holder.rollback()
        holder.close()
    assert "Answered after the lock." in await tab.until("Answered after the lock.")
    assert await asyncio.to_thread(
        stored, session.pk, "sent while another connection holds its session"
    )
