"""A database that goes away mid-reply (issue 51, item 3): the reply the user watched is saved
once the database is back (the tab says "Saving…" meanwhile), the claim is released, and the
prompt queued behind it is answered, with no new tab needed. A real PostgreSQL of the test's
own is stopped and started again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from websockets.asyncio.client import connect

from .conftest import claude_env
from .fake_anthropic import FakeAnthropic, Reply
from .servers import ROOT, Daphne, free_port, require

pytestmark = pytest.mark.asyncio

MAKE_USER_AND_SESSION = """
import json
from django.contrib.auth.models import User
from django.test import Client
from sessions.models import ChatSession
user = User.objects.create_user("outage", password="outage-pass-123")
session = ChatSession.objects.create(owner=user, model="claude-fake-test")
client = Client()
client.force_login(user)
print(json.dumps({"session": session.pk, "cookie": client.cookies["sessionid"].value}))
"""


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own, in a temporary folder, on a free port."""

    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            require("initdb")  # skips (or fails, when services are required) with a reason
        self.bin = bins[-1].parent if bins else Path(shutil.which("initdb") or "").parent
        self.folder = Path(tempfile.mkdtemp(prefix="agentweb-outage-"))
        self.data = self.folder / "data"
        self.port = free_port()
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.folder, "postgres")
        self.run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "agentweb")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/agentweb"

    def run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(command)]
        subprocess.run(command, check=True, capture_output=True, cwd=self.folder)

    def start(self) -> None:
        options = f"'-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1'"
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-o", options, "start")  # fmt: skip

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped already
            self.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as connection:
            return connection.execute(sql).fetchall()  # type: ignore[arg-type]


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.remove()


def prepared(postgres: PrivatePostgres) -> dict[str, Any]:
    """The cluster migrated, with a user signed in and an empty session of theirs."""
    env = {**os.environ, "DATABASE_URL": postgres.url}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], check=True, capture_output=True, cwd=ROOT, env=env)  # fmt: skip
    made = subprocess.run(
        [*manage, "shell", "-c", MAKE_USER_AND_SESSION],
        check=True, capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    return json.loads(made.stdout.strip().splitlines()[-1])


async def frames_until(tab: Any, received: list[str], text: str, timeout: float = 30) -> str:
    async with asyncio.timeout(timeout):
        while not any(text in frame for frame in received):
            received.append(str(await tab.recv()))
    return next(frame for frame in received if text in frame)


async def test_a_reply_whose_final_save_meets_a_stopped_database_is_saved_when_it_returns(
    postgres: PrivatePostgres, fake_server: FakeAnthropic
):
    fake_server.reset()
    made = await asyncio.to_thread(prepared, postgres)
    fake_server.enqueue(
        Reply.held(["The whole ", "reply ", "streams "], ["and ends."]),
        Reply.text("The second answer."),
    )
    # claims renewed every 3 s: one renewal surely meets the stopped database (it must log a
    # line, not a traceback) and none is lost before the database is back
    server = Daphne(
        "daphne-outage", **claude_env(fake_server.url), DATABASE_URL=postgres.url,
        AGENTWEB_GENERATION_LEASE="9",
    )  # fmt: skip
    try:
        async with connect(
            server.ws_url(f"/ws/sessions/{made['session']}/"),
            additional_headers={"Cookie": f"sessionid={made['cookie']}"},
            origin=server.url,  # type: ignore[arg-type]
            max_size=None,
        ) as tab:
            received: list[str] = []
            await tab.send(json.dumps({"message": "First"}))
            assert await asyncio.to_thread(fake_server.wait_for_hold)
            await tab.send(json.dumps({"message": "Second"}))
            await frames_until(tab, received, "Queued")

            await asyncio.to_thread(postgres.stop)
            fake_server.release()  # the reply ends while the database is away
            saving = await frames_until(tab, received, "Saving…")
            assert "the reply is kept here and saved as soon as it answers" in saving
            await asyncio.sleep(4)  # the database stays away a while
            await asyncio.to_thread(postgres.start)

            await frames_until(tab, received, "The second answer.")  # no new tab needed
            async with asyncio.timeout(30):
                while postgres.rows("SELECT generation_id FROM chat_chatsession") != [("",)]:
                    await asyncio.sleep(0.2)
        entries = postgres.rows("SELECT role, status, content FROM chat_entry ORDER BY id")
        said = [(role, status, block[0]["text"]) for role, status, block in entries]
        assert said == [
            ("user", "complete", "First"),
            ("assistant", "complete", "The whole reply streams and ends."),
            ("user", "complete", "Second"),
            ("assistant", "complete", "The second answer."),
        ]
    finally:
        server.stop()  # and its log holds no fault: no ERROR, no exception never retrieved
