"""A PostgreSQL connection the server dropped (a restart, an idle timeout) is never handed to a
call: Django's pool checks each connection as it hands it out, and replaces a dead one."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from .conftest import direct_params

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no server to go away")


def a_new_call() -> None:
    """What Django does at the end of every request (and every database call of the server):
    the connection goes back to the pool."""
    connection.close_if_unusable_or_obsolete()


def backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def dropped_by_the_server(pid: int) -> None:
    """The server ends that connection, as a restart or an idle timeout would."""
    with psycopg.connect(**direct_params(connection), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_the_server_dropped_is_replaced_before_any_call_meets_it(postgresql):
    pid = backend()
    a_new_call()
    dropped_by_the_server(pid)
    assert backend() != pid  # no error: the pool's check found it gone
    a_new_call()
    assert backend() > 0
