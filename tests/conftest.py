"""Shared fixtures: users, a fake Anthropic server at the network edge, WebSocket clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db.models import OuterRef, Subquery
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect

from sessions import generation
from sessions.models import ChatSession, Entry

from .fake_anthropic import FakeAnthropic
from .servers import Daphne, RedisServer

FAKE_MODEL = "claude-fake-test"


def claude_env(fake_url: str) -> dict[str, str]:
    """A server process's environment for Claude at the fake Anthropic server (no retries)."""
    return {
        "AGENTWEB_MODEL": FAKE_MODEL,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_url,
        "AGENTWEB_MAX_RETRIES": "0",
    }


# The six sections of a handoff document (SPEC H4), as a test writes them.
SIX_SECTIONS = (
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Critical Context",
    "Next Steps",
)


def pytest_configure(config: pytest.Config) -> None:
    """On PostgreSQL, the test process's pool may hold 40 connections (the server's, 20): the
    threads of the async tests' ended event loops keep a few taken (see `ended_everywhere`),
    and a full run's hundreds of async tests came near 20. The daphne processes the tests
    start keep the server's 20 each."""
    from django.conf import settings

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["max_size"] = max(pool.get("max_size", 0), 40)


# Settings the tests change most, as the run began: after each test they must be so again.
WATCHED_SETTINGS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "AGENTWEB_MODELS",
    "AGENTWEB_CLAUDE_MODELS",
    "AGENTWEB_HANDOFF_DRAFTS",
    "STORAGES",
)
_settings_at_start: dict[str, Any] = {}
_leak_reported: list[str] = []


def _watched_settings() -> dict[str, Any]:
    from django.conf import settings

    return {name: getattr(settings, name, None) for name in WATCHED_SETTINGS}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A test whose changes to the settings outlive it (the `settings` fixture undoes them at
    teardown) fails there, named, once: every later test would otherwise fail for it."""
    result = yield
    if not _settings_at_start:
        return result
    left = {
        name: value
        for name, value in _watched_settings().items()
        if value != _settings_at_start[name]
    }
    if left and not _leak_reported:
        _leak_reported.append(item.nodeid)
        raise AssertionError(f"{item.nodeid} left settings changed: {sorted(left)}")
    uses_db = "django_db" in item.keywords or {"db", "transactional_db"} & set(
        getattr(item, "fixturenames", ())
    )
    # (After the last test, the test database is gone: nothing to read.)
    if uses_db and nextitem and (kept := rows_left_behind()):
        _rows_left.append(f"{item.nodeid}\n{kept}")
    return result


_rows_left: list[str] = []


def rows_left_behind() -> str:
    """On PostgreSQL, what a test left in the database after its teardown (nothing, when its
    transaction was rolled back or its tables flushed), read on a connection of its own, with
    the server's other connections to the test database, the pool's counts and the threads;
    and the tables emptied, so that the tests after it start as they should. A run whose
    tables stopped being emptied once failed every test after that point; this names the
    test, and the report ends the run's output (`pytest_terminal_summary`)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return ""
    with psycopg.connect(**direct_params(connection), autocommit=True) as direct:
        users, sessions = direct.execute(
            "SELECT (SELECT count(*) FROM auth_user), "
            f"(SELECT count(*) FROM {ChatSession._meta.db_table})"
        ).fetchone() or (0, 0)
        if not (users or sessions):
            return ""
        others = direct.execute(
            "SELECT pid, application_name, state, wait_event_type, wait_event, "
            "now() - xact_start, left(query, 160) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        emptied = emptied_on(
            direct, connection.introspection.django_table_names(include_views=False)
        )
    return "\n".join(
        [
            f"users {users}, sessions {sessions}; {emptied}",
            f"pool: {connection.pool.get_stats() if connection.pool else None}",
            f"threads: {sorted(thread.name for thread in threading.enumerate())}",
            *(repr(row) for row in others),
        ]
    )


def emptied_on(direct: psycopg.Connection[Any], tables: list[str]) -> str:
    """The test database's tables emptied, as Django's flush does; when another connection
    holds a lock on them for 10 s, the ones in a transaction are ended first."""
    from psycopg import sql

    truncate = sql.SQL("TRUNCATE {} CASCADE").format(
        sql.SQL(", ").join(map(sql.Identifier, tables))
    )
    direct.execute("SET lock_timeout = '10s'")
    try:
        direct.execute(truncate)
        return "emptied"
    except psycopg.errors.LockNotAvailable:
        direct.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'"
        )
        direct.execute(truncate)
        return "emptied after ending the connections in a transaction, which held a lock"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _rows_left:
        terminalreporter.section("tests that left rows in the database (emptied after each)")
        terminalreporter.write_line("\n\n".join(_rows_left[:5]))


def direct_params(connection: Any) -> dict[str, Any]:
    """Django's connection parameters for a psycopg connection of the test's own."""
    params = dict(connection.get_connection_params())
    for name in ("cursor_factory", "context", "pool"):
        params.pop(name, None)
    return params


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if not _settings_at_start:
        _settings_at_start.update(_watched_settings())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests last: Playwright's sync API holds an event loop async tests must not meet."""
    items.sort(key=lambda item: "/browser/" in str(item.path))


@pytest.fixture(scope="session", autouse=True)
def close_kept_connections(django_db_setup: Any) -> Iterator[None]:
    """Connections are kept between calls (CONN_MAX_AGE), also by the one thread that
    `database_sync_to_async` runs on and for the short calls on the loop: close them before
    the test database is dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)
    connections.close_all()
    for connection in connections.all():
        if connection.vendor == "postgresql":
            ended_everywhere(connection)


def ended_everywhere(connection: Any) -> None:
    """The pool closed, and the test database's connections it still counted as taken (three or
    four at the end of a run, idle: threads of the async tests' ended event loops kept them)
    ended by the server, so that the database can be dropped."""
    connection.close_pool()
    params = direct_params(connection)
    test_database = params.pop("dbname")
    with psycopg.connect(**params, dbname="postgres", autocommit=True) as server:
        server.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [test_database],
        )


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()


@pytest.fixture
def fake_anthropic(fake_server: FakeAnthropic, settings: Any) -> FakeAnthropic:
    """The fake server, empty, wired in as the API the real SDK calls."""
    fake_server.reset()
    settings.ANTHROPIC_BASE_URL = fake_server.url
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.AGENTWEB_MAX_RETRIES = 0
    settings.AGENTWEB_CLAUDE_MODELS = [FAKE_MODEL, *settings.AGENTWEB_CLAUDE_MODELS]
    return fake_server


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    """Rolled-back tests reuse primary keys, so cached results must not outlive a test."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def fast_local_model(settings: Any) -> None:
    settings.AGENTWEB_LOCAL_TOKEN_DELAY = 0


@pytest.fixture(autouse=True)
def no_handoff_drafts(settings: Any) -> None:
    """No draft written in the background, but where a test asks for one
    (`test_handoff_drafts.py`): its model call would take a reply the test scripted."""
    settings.AGENTWEB_HANDOFF_DRAFTS = False


@pytest.fixture(scope="session")
def attachments_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("attachments"))


@pytest.fixture(autouse=True)
def attachments_kept_apart(settings: Any, attachments_dir: str) -> None:
    """Files attached in a test are kept under the test run's own directory."""
    kept = {**settings.STORAGES["attachments"], "OPTIONS": {"location": attachments_dir}}
    settings.STORAGES = {**settings.STORAGES, "attachments": kept}


@pytest.fixture
def owner(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def other_user(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("other", password="other-pass-123")


def make_session(owner: User, *, model: str = FAKE_MODEL, exchanges: int = 0) -> ChatSession:
    session = ChatSession.objects.create(owner=owner, model=model)
    for i in range(exchanges):
        session.append_message("user", [{"type": "text", "text": f"question {i}"}])
        session.append_message("assistant", [{"type": "text", "text": f"answer {i}"}])
    return session


def linear_session(owner: User, texts: list[str], *, model: str = FAKE_MODEL) -> ChatSession:
    """A session of one long branch of user messages, written in bulk (thousands of entries
    in a moment), each derived as an appended entry is."""
    session = ChatSession.objects.create(owner=owner, model=model)
    made = Entry.objects.bulk_create(
        [Entry(session=session, role="user", content=[{"type": "text", "text": text}]).derive() for text in texts],
        batch_size=1000,
    )  # fmt: skip
    # Each entry's parent is the one made before it: one statement (a CASE a row took minutes).
    before = Entry.objects.filter(session=session, pk__lt=OuterRef("pk")).order_by("-pk")
    Entry.objects.filter(session=session).update(parent_id=Subquery(before.values("pk")[:1]))
    ChatSession.objects.filter(pk=session.pk).update(leaf_id=made[-1].pk)
    return ChatSession.objects.get(pk=session.pk)


class Tab:
    """One browser tab's WebSocket, as the page opens it."""

    def __init__(self, communicator: WebsocketCommunicator, cookie: str = "") -> None:
        self.ws = communicator
        self.cookie = cookie  # the sign-in it was opened with
        self.received: list[str] = []

    async def send(self, **fields: Any) -> None:
        await self.ws.send_to(text_data=json.dumps(fields))

    async def receive(self, timeout: float = 5) -> str:
        html = await self.ws.receive_from(timeout=timeout)
        self.received.append(html)
        return html

    async def until(self, needle: str, timeout: float = 10) -> str:
        """Receive frames until one contains `needle`; returns everything received meanwhile."""
        seen: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise TimeoutError
                html = await self.receive(timeout=remaining)
            except TimeoutError:
                raise AssertionError(
                    f"{needle!r} never arrived; got: {''.join(seen)[-3000:]}"
                ) from None
            seen.append(html)
            if needle in html:
                return "".join(seen)

    async def until_idle(self, timeout: float = 10) -> str:
        """Receive frames until the status line says nothing is running (the generation has
        ended and released its session, not just shown its reply)."""
        seen: list[str] = []
        while True:
            html = await self.until('id="status"', timeout)
            seen.append(html)
            if "status-generating" not in html[html.rindex('id="status"') :]:
                return "".join(seen)

    async def close(self) -> None:
        await self.ws.disconnect()


async def _cookie_for(user: User) -> str:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    return await database_sync_to_async(login)()


@pytest_asyncio.fixture
async def open_tab() -> AsyncIterator[Callable[..., Any]]:
    """open_tab(user, session, after=0) -> (connected, Tab)."""
    from agentweb.asgi import application

    tabs: list[Tab] = []

    async def open_(user: User, session: ChatSession, after: int = 0) -> tuple[bool, Tab]:
        cookie = await _cookie_for(user)
        communicator = WebsocketCommunicator(
            application,
            f"/ws/sessions/{session.pk}/?after={after}",
            headers=[
                (b"cookie", f"sessionid={cookie}".encode()),
                (b"origin", b"http://localhost"),
                (b"host", b"localhost"),
            ],
        )
        connected, _ = await communicator.connect()
        tab = Tab(communicator, cookie)
        tabs.append(tab)
        return connected, tab

    yield open_
    # Whatever the test left running ends here, cancelled and awaited: it never reaches the
    # next test (a job that cannot be stopped fails this one).
    await generation.stop_all()
    failed: list[BaseException] = []
    for tab in tabs:  # every tab, even past one whose consumer died (its error said after)
        try:
            await tab.ws.disconnect()
        except BaseException as error:  # noqa: BLE001 - raised below, once all are closed
            failed.append(error)
    if failed:
        raise failed[0]


db_async = database_sync_to_async


@contextlib.asynccontextmanager
async def database_away(refused: Callable[[str], bool]) -> AsyncIterator[None]:
    """On the one database thread (where `database_sync_to_async` runs the app's calls), the
    statements `refused` picks fail as a database that does not answer, through Django's
    `connection.execute_wrapper`."""
    from django.db import OperationalError, connection

    def away(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if refused(sql):
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    outage = contextlib.ExitStack()
    await db_async(lambda: outage.enter_context(connection.execute_wrapper(away)))()
    try:
        yield
    finally:
        await db_async(outage.close)()


# --- several processes: one Redis, a tab's WebSocket to a daphne -------------------------------
@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


class Socket:
    """A browser tab's WebSocket to one server process."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.text = ""

    async def send(self, **fields: str) -> None:
        await self.connection.send(json.dumps(fields))

    async def until(self, needle: str, timeout: float = 15) -> str:
        try:
            async with asyncio.timeout(timeout):
                while needle not in self.text:
                    self.text += str(await self.connection.recv())
        except TimeoutError:
            raise AssertionError(f"{needle!r} never came; the tail: {self.text[-3000:]}") from None
        return self.text


@pytest_asyncio.fixture
async def open_socket() -> AsyncIterator[Any]:
    opened: list[ClientConnection] = []

    async def open_(server: Daphne, user: Any, session: ChatSession) -> Socket:
        cookie = await _cookie_for(user)
        connection = await connect(
            server.ws_url(f"/ws/sessions/{session.pk}/"),
            additional_headers={"Cookie": f"sessionid={cookie}"},
            origin=server.url,  # type: ignore[arg-type]
        )
        opened.append(connection)
        return Socket(connection)

    yield open_
    for connection in opened:
        # Whatever the test left running in a server process is cancelled (a Cancel reaches
        # the job wherever it runs), so that it never reaches the next test.
        with contextlib.suppress(Exception):
            await connection.send(json.dumps({"action": "cancel"}))
        await connection.close()
