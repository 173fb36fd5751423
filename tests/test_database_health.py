"""A kept PostgreSQL connection is checked (a round trip) only when it sat idle: one that sent a
statement a moment ago is taken as it is, and a connection the server dropped is replaced either
way, by the check or after the one call that found it gone."""

from __future__ import annotations

import math

import psycopg
import pytest
from django.db import OperationalError, connection

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no server to go away: Django never checks its connections")


def a_new_call() -> None:
    """What Django does at the end of every request (and every database call of the server)."""
    connection.close_if_unusable_or_obsolete()


def backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def dropped_by_the_server(pid: int) -> None:
    """The server ends that connection, as a restart or an idle timeout would."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_idle_past_the_healthy_time_is_checked_and_replaced(postgresql):
    pid = backend()
    a_new_call()
    dropped_by_the_server(pid)
    connection.used_at = -math.inf  # idle since long ago
    assert backend() != pid  # the check found it gone: a new connection, no error


def test_a_connection_used_a_moment_ago_is_not_checked_and_a_failed_call_replaces_it(postgresql):
    pid = backend()
    a_new_call()
    dropped_by_the_server(pid)
    with pytest.raises(OperationalError):  # no round trip before it: the statement finds out
        backend()
    a_new_call()  # the error closed it
    assert backend() != pid
