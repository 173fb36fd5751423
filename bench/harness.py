"""What every benchmark needs: Django on a throwaway database, a signed-in user, the fake API.

Call `setup()` before importing any project code.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth.models import User

    from sessions.models import ChatSession, Entry
    from tests.fake_anthropic import FakeAnthropic

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-bench"


def setup() -> None:
    """Point DATABASE_URL at a temporary SQLite file (or at BENCH_DATABASE_URL, a database the
    bench may fill, e.g. a PostgreSQL one; or at a database of its own on the PostgreSQL server
    BENCH_POSTGRES names, made for this run and dropped at its end) and set Django up."""
    sys.path.insert(0, str(ROOT))
    if server := os.environ.get("BENCH_POSTGRES"):
        os.environ["BENCH_DATABASE_URL"] = throwaway_postgres(server)
    throwaway = f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.sqlite3'}"
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or throwaway
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentweb.settings")
    import django

    django.setup()


@contextlib.contextmanager
def on_layer(layer: str) -> Iterator[str]:
    """`setup()` on the channel layer `layer` names: "memory" (the default), or "redis" (the
    bus, on a redis-server of its own for the block); the layer's name, as a bench prints it."""
    redis = None
    if layer == "redis":
        sys.path.insert(0, str(ROOT))
        from tests.servers import RedisServer

        redis = RedisServer()
        os.environ["REDIS_URL"] = redis.url
    setup()
    try:
        yield "Redis" if redis else "in-memory"
    finally:
        if redis is not None:
            redis.stop()


def throwaway_postgres(server: str) -> str:
    """The URL of a new, empty database on `server` (postgres://user@host:port/postgres: a
    server the benches may add databases to), dropped when this process ends, as a SQLite
    bench's file is thrown away: each run starts from nothing, whatever ran before."""
    import atexit
    import secrets
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    name = f"bench_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def drop() -> None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))

    atexit.register(drop)
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def chained(session: ChatSession, rows: list[Entry]) -> ChatSession:
    """`rows` (entries of `session`, unsaved) written in bulk as one branch, the last its leaf."""
    from sessions.models import ChatSession, Entry

    made = Entry.objects.bulk_create(rows, batch_size=1000)
    for before, entry in zip(made, made[1:], strict=False):
        entry.parent_id = before.pk
    Entry.objects.bulk_update(made[1:], ["parent"], batch_size=1000)
    ChatSession.objects.filter(pk=session.pk).update(leaf_id=made[-1].pk)
    return ChatSession.objects.get(pk=session.pk)


def cookie_for(user: User) -> str:
    """A session cookie signed in as `user`."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def signed_in_user() -> tuple[User, str]:
    """Migrate the throwaway database; a user and their session cookie."""
    from channels.db import database_sync_to_async
    from django.contrib.auth.models import User
    from django.core.management import call_command

    def make() -> tuple[User, str]:
        call_command("migrate", verbosity=0)
        user = User.objects.create_user("bench", password="bench-pass-1")
        return user, cookie_for(user)

    return await database_sync_to_async(make)()


def chromium_page(playwright: Any, url: str, cookie: str, init_script: str) -> tuple[Any, Any]:
    """The system Chromium (or AGENTWEB_CHROMIUM) and a page signed in at `url` with `cookie`,
    running `init_script` before every document."""
    from tests.browser.conftest import CHROMIUM

    browser = playwright.chromium.launch(
        executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"]
    )
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": cookie, "url": url}])
    page = context.new_page()
    page.add_init_script(init_script)
    return browser, page


def fake_api() -> FakeAnthropic:
    """The fake Anthropic server, wired in as this process's API."""
    from django.conf import settings

    from tests.fake_anthropic import FakeAnthropic

    fake = FakeAnthropic().start()
    settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = fake.url, "k"
    settings.AGENTWEB_MAX_RETRIES = 0
    settings.AGENTWEB_CLAUDE_MODELS = [MODEL, *settings.AGENTWEB_CLAUDE_MODELS]  # offered
    settings.AGENTWEB_MAX_GENERATIONS_PER_USER = 10_000
    settings.AGENTWEB_FRAMES_PER_SECOND = 10_000.0
    return fake


async def open_tab(
    user: User, cookie: str, model: str = MODEL, session: Any = None
) -> WebsocketCommunicator:
    """A connected in-process WebSocket to the page of `session`, or of a new session of the
    user's."""
    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator

    from agentweb.asgi import application
    from sessions.models import ChatSession

    if session is None:
        session = await database_sync_to_async(ChatSession.objects.create)(owner=user, model=model)
    tab = WebsocketCommunicator(
        application,
        f"/ws/sessions/{session.pk}/",
        headers=[
            (b"cookie", f"sessionid={cookie}".encode()),
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
        ],
    )
    await tab.connect()
    return tab


def median_seconds(run: Callable[[], Any], runs: int) -> float:
    """The median wall time of `runs` calls of `run`."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def analyzed() -> None:
    """On PostgreSQL, the tables a bench filled analyzed, as autovacuum would have by now."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def warm_median_ms(run: Callable[[], Any], runs: int) -> float:
    """`median_seconds` in milliseconds, after one call that warms what it reads (the
    statements planned, the caches filled)."""
    run()
    return median_seconds(run, runs) * 1000


def time_switches(session: Any, document: str, runs: int) -> list[float]:
    """Seconds each handoff switch takes after its document is written (a document starts one
    session, so each run gets a reply of its own)."""
    import asyncio

    from sessions.agent import AgentSession
    from sessions.models import ChatSession

    seconds = []
    for _ in range(runs):
        reply = session.append_message(
            "assistant", [{"type": "text", "text": document}], data={"purpose": "handoff"}
        )
        agent = AgentSession(ChatSession.objects.get(pk=session.pk))
        started = time.perf_counter()
        asyncio.run(agent.switch(reply, document))
        seconds.append(time.perf_counter() - started)
    return seconds
