"""Real servers for tests that cross process boundaries: daphne and redis-server on loopback."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
FAULT = re.compile(r" (ERROR|CRITICAL) |^Traceback |never retrieved")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, process: subprocess.Popen[bytes], name: str, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited; see {ARTIFACTS}") from None
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {port} within {timeout}s")


def test_database_url() -> str:
    """The URL of the database the tests run on, for server processes to share it."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{database['NAME']}"
    return os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + database["NAME"]


def require(program: str, variable: str = "AGENTWEB_REQUIRE_SERVICES") -> str:
    """The program's path; skip (or, with `variable`=1, fail) when it is not installed."""
    path = shutil.which(program)
    if path is None:
        reason = f"{program} is not installed (Debian: apt-get install {program})"
        if os.environ.get(variable) == "1":
            pytest.fail(f"{reason}; {variable}=1 makes this a failure")
        pytest.skip(reason)
    return path


async def read_until_idle(tab: Any, received: list[str], timeout: float = 30) -> None:
    """Read a daphne tab's frames (a `websockets` client) into `received` until the status line
    says nothing runs: the server's job has ended and released the session, so a test's end
    (PostgreSQL's TRUNCATE) does not meet the job's last writes."""
    async with asyncio.timeout(timeout):
        while True:
            last = received[-1] if received else ""
            status = last.rfind('id="status"')
            if status >= 0 and "status-generating" not in last[status:]:
                return
            received.append(str(await tab.recv()))


class Daphne:
    """agentweb served by daphne in a process of its own."""

    def __init__(
        self, name: str, *, program: tuple[str, ...] = ("-m", "daphne"), **env: str
    ) -> None:
        """`program`: what the interpreter runs, daphne's command line after it (the benches'
        cProfile runs daphne from a script of theirs)."""
        self.name = name
        self.port = free_port()
        ARTIFACTS.mkdir(exist_ok=True)
        self.log = (ARTIFACTS / f"{name}.log").open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                *program,
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "agentweb.asgi:application",
            ],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": test_database_url(),
                "DJANGO_SECRET_KEY": settings.SECRET_KEY,
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "AGENTWEB_HANDOFF_DRAFTS": "0",  # no model call a test did not script
                "AGENTWEB_ATTACHMENTS_DIR": str(ARTIFACTS / "attachments"),
                **env,
            },
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, self.process, name)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws_url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as in a crash."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """Stop it; its log must hold no fault (`faults`): a day's log has none."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        if faults := self.faults():
            raise AssertionError(f"{self.name}'s log has faults:\n" + "\n".join(faults[:80]))

    def faults(self) -> list[str]:
        """The lines of its log that say something went wrong unhandled: an ERROR (daphne's
        "Exception inside application" among them), a traceback, an exception no one
        retrieved."""
        text = (ARTIFACTS / f"{self.name}.log").read_text(errors="replace")
        lines = text.splitlines()
        found: list[str] = []
        for at, line in enumerate(lines):
            if FAULT.search(line):
                found.append(line)
                if line.startswith("Traceback"):  # the whole traceback, to its exception line
                    for more in lines[at + 1 :]:
                        found.append(more)
                        if more and not more.startswith(" "):
                            break
        return found


class RedisServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [require("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, self.process, "redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
