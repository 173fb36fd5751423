"""On PostgreSQL a prompt is checked and taken beside the process's other database work, not in
line behind it on the one database thread (issue 21): the frame's check and the queueing run
on a pool of their own. On SQLite, one writer, they stay on the one thread."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from sessions.models import Entry

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


async def test_on_postgresql_a_prompt_is_taken_while_the_database_thread_is_busy(
    owner, fake_anthropic, open_tab
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite keeps every database call on the one thread (one writer)")
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
