"""On PostgreSQL, statements are bound on the server and prepared once a connection has sent
them a few times: the prompt path sends the same dozen at every prompt, and PostgreSQL then
plans each once a connection instead of at every prompt (AGENTWEB_PG_PREPARE_THRESHOLD)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection

from sessions.generation.turns import AS_CLAIMED
from sessions.models import ChatSession

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite prepares its statements in the process: there is no server to ask")


def prepared_on_the_server() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def sent(sql: str, value: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, [value])
        return int(cursor.fetchone()[0])


def test_a_statement_sent_once_is_not_prepared_and_one_sent_again_and_again_is(postgresql):
    assert sent("SELECT 41 + %s", 1) == 42
    assert "SELECT 41 + $1" not in prepared_on_the_server()
    for _ in range(5):
        assert sent("SELECT 41 + %s", 1) == 42
    assert "SELECT 41 + $1" in prepared_on_the_server()


def test_the_prompt_paths_statement_is_prepared_with_its_values_bound(postgresql):
    session = ChatSession.objects.create(owner=User.objects.create_user("p"), model="m")
    for _ in range(6):
        assert AS_CLAIMED.one(session_id=session.pk).pk == session.pk
    # The claim's read, and no other statement of it (a pooled connection may hold the
    # statements other calls prepared before).
    claimed = [
        text
        for text in prepared_on_the_server()
        if text.startswith('SELECT "chat_chatsession"') and "chat_pendingprompt" in text
    ]
    assert len(claimed) == 1
    assert "$1" in claimed[0]
