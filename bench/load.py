"""Load: N sessions streaming at once through one daphne process, on loopback.

Each session's tab sends a prompt; the fake Anthropic server answers every one with T
distinct tokens at R tokens a second. Every tab must receive every token, in order, with
no error. Reported, per N: tokens lost, errors, gaps between deltas (p50 / p95 / max),
the first delta's latency, and the server's memory (RSS: idle, with N sockets, after).

    .venv/bin/python bench/load.py --sessions 10,50,100,200 --tokens 200 --rate 40
    .venv/bin/python bench/load.py --sessions 200 --layer redis
    .venv/bin/python bench/load.py --sessions 200 --spread 5   # prompts over 5 s, not at once
    .venv/bin/python bench/load.py --sessions 400 --layer redis --processes 2 --cancels 20
    .venv/bin/python bench/load.py --sessions 200 --profile-setup 1   # py-spy on the set-up
    .venv/bin/python bench/load.py --sessions 200 --timeline 2   # where the burst's time goes

`make load` runs that; CI runs tests/test_load.py (a small N, the same code).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import html
import json
import math
import os
import re
import signal
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DELTA = re.compile(r'<div id="live-text" hx-swap-oob="beforeend">(.*?)</div>', re.DOTALL)


@dataclass
class Tab:
    sent_at: float = 0.0
    asked_at: float = 0.0  # when the model's request for its reply reached the fake server
    deltas: list[tuple[float, str]] = field(default_factory=list)
    error: str = ""
    done: bool = False  # its reply ended

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.deltas)


@dataclass
class Report:
    sessions: int
    tokens: int
    rate: float
    tabs: list[Tab]
    rss_idle_kb: int
    rss_connected_kb: int
    rss_after_kb: int
    cpu_seconds: float = 0.0  # the daphne process's CPU time from the prompts to the last end
    setup_cpu_seconds: float = 0.0  # the same, from the prompts to the last model request
    # cancels sent by a tab on another process than the one generating, during the load:
    # (ms to the model connection closed, ms to "Cancelled" in the cancelling tab, whether the
    # load's streams were still running)
    cancels: list[tuple[float, float, bool]] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)  # Timeline's lines, when asked for

    @property
    def expected(self) -> str:
        return "".join(f"token{i} " for i in range(self.tokens))

    @property
    def lost(self) -> int:
        """Tabs whose text is not exactly every token in order."""
        return sum(tab.text != self.expected for tab in self.tabs)

    @property
    def errors(self) -> list[str]:
        return [tab.error for tab in self.tabs if tab.error]

    def gaps_ms(self) -> list[float]:
        return [
            (later[0] - earlier[0]) * 1000
            for tab in self.tabs
            for earlier, later in zip(tab.deltas, tab.deltas[1:], strict=False)
        ]

    def first_ms(self) -> list[float]:
        return [(tab.deltas[0][0] - tab.sent_at) * 1000 for tab in self.tabs if tab.deltas]

    def asked_ms(self) -> list[float]:
        """From the prompt sent to the model's request arriving: the server's part of the first
        delta's wait (the rest is the model's first token and its relay to the tab)."""
        return [(tab.asked_at - tab.sent_at) * 1000 for tab in self.tabs if tab.asked_at]

    def line(self) -> str:
        gaps = sorted(self.gaps_ms()) or [0.0]
        first = sorted(self.first_ms()) or [0.0]
        asked = sorted(self.asked_ms()) or [0.0]
        per_socket = (self.rss_connected_kb - self.rss_idle_kb) / max(1, self.sessions)
        return (
            f"N={self.sessions:4}  lost {self.lost}  errors {len(self.errors)}  "
            f"gap p50/p95/max {_pct(gaps, 50):5.0f} /{_pct(gaps, 95):5.0f} /{gaps[-1]:6.0f} ms  "
            f"first delta p50/p95 {_pct(first, 50):5.0f} /{_pct(first, 95):5.0f} ms "
            f"(the model asked p50/p95 {_pct(asked, 50):5.0f} /{_pct(asked, 95):5.0f} ms)  "
            f"RSS idle {self.rss_idle_kb / 1024:.0f} MB, +{per_socket:.0f} KB a socket, "
            f"after {self.rss_after_kb / 1024:.0f} MB  "
            f"CPU {self.cpu_seconds * 1000 / max(1, self.sessions):.0f} ms a stream"
            + self.setup_line()
            + self.cancel_line()
        )

    def setup_line(self) -> str:
        """The set-up's CPU a prompt: only when they all went at once (spread out, the first
        ones stream while the last set up)."""
        if not self.setup_cpu_seconds:
            return ""
        return f", {self.setup_cpu_seconds * 1000 / max(1, self.sessions):.1f} ms to its request"

    def cancel_line(self) -> str:
        if not self.cancels:
            return ""
        closed = sorted(ms for ms, _, _ in self.cancels)
        shown = sorted(ms for _, ms, _ in self.cancels)
        during = sum(running for _, _, running in self.cancels)
        return (
            f"\n        {len(self.cancels)} cancels across processes ({during} while the load "
            f"streamed): model connection closed p50/p95 {_pct(closed, 50):4.0f} /"
            f"{_pct(closed, 95):4.0f} ms, Cancelled in the cancelling tab p50/p95 "
            f"{_pct(shown, 50):4.0f} /{_pct(shown, 95):4.0f} ms"
        )


def _pct(values: list[float], percent: float) -> float:
    return values[min(len(values) - 1, int(len(values) * percent / 100))]


LAYERS = {
    "memory": "in-memory",
    "redis": "Redis (the bus)",
    "redis-pubsub": "Redis (channels-redis Pub/Sub)",
    "redis-queued": "Redis (channels-redis queued)",
}


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pids_named(name: str) -> list[int]:
    """The processes on this machine whose command is `name` (a PostgreSQL server's backends
    come and go), when this user may read them; none otherwise."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    cpu_seconds(int(entry.name))  # readable
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _open(server: Any, session_id: int, cookie: str) -> Any:
    """A tab's socket on `server` for the session."""
    from websockets.asyncio.client import connect

    url = server.ws_url(f"/ws/sessions/{session_id}/")
    return await connect(
        url, additional_headers={"Cookie": f"sessionid={cookie}"}, origin=server.url,
        max_size=None, open_timeout=60,
    )  # fmt: skip


async def run(
    servers: list[Any],
    cookies: dict[int, str],
    session_ids: list[int],
    timeout: float,
    spread: float = 0.0,
    on_ready: Any = None,
    tabs: list[Tab] | None = None,
) -> tuple[list[Tab], int]:
    """Open a tab per session; once every tab has its page state (the status line of its first
    sync), send a prompt in each: all at once, or at even intervals over `spread` seconds.
    Read every frame to the reply's end."""
    if tabs is None:
        tabs = []
    tabs[:] = [Tab() for _ in session_ids]  # the caller's list, so it can watch them
    ready = asyncio.Event()
    synced = 0
    rss_connected = 0

    async def one(index: int, tab: Tab, session_id: int) -> None:
        nonlocal synced, rss_connected
        server = servers[index % len(servers)]  # the tabs split between the processes
        try:
            async with await _open(server, session_id, cookies[session_id]) as ws:
                while 'id="status"' not in str(await asyncio.wait_for(ws.recv(), timeout)):
                    pass
                synced += 1
                if synced == len(tabs):
                    rss_connected = sum(rss_kb(one.process.pid) for one in servers)
                    if on_ready is not None:
                        on_ready()
                    ready.set()
                await ready.wait()
                await asyncio.sleep(spread * index / len(tabs))
                tab.sent_at = time.monotonic()
                await ws.send(json.dumps({"message": f"stream please {session_id}"}))
                # A reply that stops for `timeout` fails the run. One deadline, moved on once a
                # second, not a `wait_for` each frame: its task a frame was a third of these
                # tabs' CPU, which the machine's two cores share with the servers measured.
                loop = asyncio.get_running_loop()
                async with asyncio.timeout(loop.time() + timeout) as deadline:
                    moved = loop.time()
                    while True:
                        frame = str(await ws.recv())
                        now = time.monotonic()
                        if now - moved >= 1:  # the loop's clock is time.monotonic()
                            deadline.reschedule(now + timeout)
                            moved = now
                        tab.deltas += [(now, html.unescape(text)) for text in DELTA.findall(frame)]
                        if "Failed:" in frame:
                            tab.error = frame[:300]
                        if "entry--assistant status--" in frame:
                            tab.done = True
                            return
        except Exception as error:  # noqa: BLE001 - every failure is a result to report
            tab.error = f"{type(error).__name__}: {error}"
            ready.set()

    await asyncio.gather(
        *(one(i, tab, sid) for i, (tab, sid) in enumerate(zip(tabs, session_ids, strict=True)))
    )
    return tabs, rss_connected


class Watched:
    """A tab that reads every frame as it comes, as a browser does; `watch` notes when a frame
    first says each of some texts."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.said: dict[str, asyncio.Future[float]] = {}
        self.reading = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            async for message in self.ws:
                self._saw(str(message))

    def _saw(self, frame: str) -> None:
        for text, at in self.said.items():
            if not at.done() and text in frame:
                at.set_result(time.monotonic())

    def watch(self, *texts: str) -> None:
        """From now on, note the first frame that says each of `texts`."""
        loop = asyncio.get_running_loop()
        self.said = {text: loop.create_future() for text in texts}

    async def first(self, timeout: float) -> tuple[str, float]:
        """Which of the watched texts a frame said first, and when."""
        said = self.said
        done, _ = await asyncio.wait(
            said.values(), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            raise TimeoutError(f"no frame said any of {list(said)} in {timeout} s")
        return min(((text, at.result()) for text, at in said.items() if at.done()), key=_when)

    async def close(self) -> None:
        await self.ws.close()
        await self.reading


def _when(said: tuple[str, float]) -> float:
    return said[1]


class Cancels:
    """Sessions whose replies a tab on another process than their generation's cancels while
    the load streams: a prompt in each from a tab on the first process, every reply streaming
    before the load starts; then, one at a time once the load's replies stream, a tab on the
    last process cancels one, timed to the model connection closing (the fake server's count
    of disconnects) and to `Cancelled` in that tab. Both tabs read every frame as it comes."""

    def __init__(
        self, servers: list[Any], fake: Any, cookies: dict[int, str], timeout: float
    ) -> None:
        self.start, self.other = servers[0], servers[-1]
        self.fake, self.cookies, self.timeout = fake, cookies, timeout
        self.prompting: list[Watched] = []  # a tab a session, on the first process
        self.cancelling: list[Watched] = []  # a tab a session, on the last process

    async def start_replies(self, session_ids: list[int]) -> None:
        for session_id in session_ids:
            a = Watched(await _open(self.start, session_id, self.cookies[session_id]))
            b = Watched(await _open(self.other, session_id, self.cookies[session_id]))
            b.watch("token0 ")
            self.prompting.append(a)
            self.cancelling.append(b)
            await a.ws.send(json.dumps({"message": f"cancel me {session_id}"}))
        for b in self.cancelling:
            await b.first(self.timeout)  # its reply streams

    async def cancel_each(self, streaming: Any) -> list[tuple[float, float, bool]]:
        found: list[tuple[float, float, bool]] = []
        fake = self.fake
        for b in self.cancelling:
            running = streaming()
            before = fake.disconnects

            def closed_at(before: int = before) -> float:  # as the model's server saw it
                closed = fake.wait_for(lambda: fake.disconnects > before, self.timeout)
                return fake.disconnected_at[-1] if closed else math.inf

            b.watch("Cancelled", "Nothing is running.")
            sent = time.monotonic()
            await b.ws.send(json.dumps({"action": "cancel"}))
            closing = asyncio.ensure_future(asyncio.to_thread(closed_at))
            said, shown = await b.first(self.timeout)
            if said != "Cancelled":
                raise SystemExit("a cancel came after its reply had ended")
            found.append(((await closing - sent) * 1000, (shown - sent) * 1000, running))
        return found

    async def close(self) -> None:
        for tab in [*self.prompting, *self.cancelling]:
            await tab.close()


def prepare(sessions: int) -> dict[int, str]:
    """`sessions` sessions in the shared database, each a user's of their own: a sign-in cookie
    by session id. People, each with a tab, under the product's own cap (SPEC B8: a few
    generations a user at once): one user holding all the load's generations made every claim
    count that user's hundreds of live ones, a statement no real user's prompt runs."""
    from django.contrib.auth.models import User

    from bench.harness import cookie_for
    from sessions.models import ChatSession

    taken = User.objects.filter(username__startswith="load-").count()
    users = User.objects.bulk_create(
        User(username=f"load-{taken + n}", password="!") for n in range(sessions)
    )
    return {
        ChatSession.objects.create(owner=user, model="claude-load").pk: cookie_for(user)
        for user in users
    }


def server_env(fake_url: str, redis_url: str = "") -> dict[str, str]:
    return {
        **({"REDIS_URL": redis_url} if redis_url else {}),
        "AGENTWEB_MODEL": "claude-load",
        "ANTHROPIC_API_KEY": "load-key",
        "ANTHROPIC_BASE_URL": fake_url,
        "AGENTWEB_MAX_RETRIES": "0",
        "AGENTWEB_FRAMES_PER_SECOND": "100",
    }


async def measure(
    server: Any,
    fake: Any,
    sessions: int,
    tokens: int,
    rate: float,
    spread: float = 0.0,
    cancels: int = 0,
    on_prompts: Any = None,
    signal_burst: int = 0,
    timeline: float = 0.0,
) -> Report:
    """N sessions streaming at once through `server` (a Daphne, or a list of them: the tabs are
    split between the processes; memory and CPU are their sums), and `cancels` more sessions
    cancelled from another process than their generation's while the N stream. `fake` answers
    with `bench.fake_server.paced(tokens, rate)`: in its own process (`FakeServerProcess`), or
    in this one (a test's). `timeline`: seconds of `Timeline` from the prompts."""
    from channels.db import database_sync_to_async

    cookies = await database_sync_to_async(prepare)(sessions + cancels)
    # What setting the users up left (their sign-ins' test clients) is not looked at again by
    # the collector: a full collection in this process, the tabs', took 70 ms of the burst's
    # CPU from the servers measured, on the same two cores.
    gc.collect()
    gc.freeze()
    ids = list(cookies)  # in the order they were made: the load's, then the cancels'
    ids, cancelled = ids[:sessions], ids[sessions:]
    servers = server if isinstance(server, list) else [server]
    pids = [one.process.pid for one in servers]
    idle = sum(rss_kb(pid) for pid in pids)
    cpu: list[float] = []
    asked_cpu: list[float] = []
    started = asyncio.Event()
    timeout = 60 + tokens / rate
    tabs: list[Tab] = []
    sampled = Timeline(pids, fake, tabs, timeline)

    def on_ready() -> None:
        cpu.append(sum(cpu_seconds(pid) for pid in pids))
        started.set()
        if timeline:
            sampled.start(len(fake.requests))
        if on_prompts is not None:
            on_prompts()
        if signal_burst:  # bench/cprofiled.py: profile from here
            os.kill(signal_burst, signal.SIGUSR1)

    def all_asked() -> None:  # the CPU spent once every prompt has reached the model
        if fake.wait_for(lambda: len(fake.requests) >= asked_before + sessions, timeout):
            asked_cpu.append(sum(cpu_seconds(pid) for pid in pids))
            if signal_burst:  # to here
                os.kill(signal_burst, signal.SIGUSR2)

    def streaming() -> bool:
        return any(tab.deltas and not tab.done for tab in tabs)

    cancelling = Cancels(servers, fake, cookies, timeout)
    try:
        await cancelling.start_replies(cancelled)
        asked_before = len(fake.requests)
        load = asyncio.ensure_future(run(servers, cookies, ids, timeout, spread, on_ready, tabs))
        asking = asyncio.ensure_future(asyncio.to_thread(all_asked))
        timed: list[tuple[float, float, bool]] = []
        if cancelled:
            await started.wait()
            while sum(bool(tab.deltas) for tab in tabs) < len(tabs) / 2 and not load.done():
                await asyncio.sleep(0.05)  # until the load's replies stream
            timed = await cancelling.cancel_each(streaming)
        tabs, connected = await load
    finally:
        await cancelling.close()
    asked = {
        int(found.group(1)): request["arrived"]
        for request in fake.requests
        if (
            found := re.search(r"stream please (\d+)", json.dumps(request["json"]["messages"][-1:]))
        )
    }
    for tab, session_id in zip(tabs, ids, strict=True):
        tab.asked_at = asked.get(session_id, 0.0)
    await asking
    used = sum(cpu_seconds(pid) for pid in pids) - cpu[0] if cpu else 0.0
    setup = asked_cpu[0] - cpu[0] if cpu and asked_cpu and not spread else 0.0
    after = sum(rss_kb(pid) for pid in pids)
    report = Report(sessions, tokens, rate, tabs, idle, connected, after, used, setup, timed)
    report.timeline = sampled.lines()
    return report


class Timeline:
    """Every 50 ms for `seconds` from the prompts: the CPU the server processes, the fake
    model's process (when it has one), this one (the tabs' clients), a PostgreSQL server and
    Redis servers on this machine (when this user may read their processes) have spent since,
    the requests the model has had and the tabs that have their first delta. It shows which
    process a burst waits on, and when its requests leave."""

    def __init__(self, pids: list[int], fake: Any, tabs: list[Tab], seconds: float) -> None:
        self.fake, self.tabs, self.seconds = fake, tabs, seconds
        model = getattr(fake, "process", None)
        self.processes = [pids, [model.pid] if model else [], [os.getpid()]]
        self.rows: list[tuple[float, ...]] = []
        self.thread: threading.Thread | None = None

    def start(self, asked_before: int) -> None:
        self.thread = threading.Thread(target=self._sample, args=(asked_before,), daemon=True)
        self.thread.start()

    def _spent(self) -> list[float]:
        groups = [*self.processes, pids_named("postgres"), pids_named("redis-server")]
        return [sum(cpu_seconds(pid) for pid in pids) for pids in groups]

    def _sample(self, asked_before: int) -> None:
        began, spent = time.monotonic(), self._spent()
        while (now := time.monotonic()) - began < self.seconds:
            time.sleep(0.05)
            now_spent = self._spent()
            cpu = [
                (later - earlier) * 1000 for later, earlier in zip(now_spent, spent, strict=True)
            ]
            asked = len(self.fake.requests) - asked_before
            first = sum(bool(tab.deltas) for tab in self.tabs)
            self.rows.append(((now - began) * 1000, *cpu, asked, first))

    def lines(self) -> list[str]:
        if self.thread is None:
            return []
        self.thread.join()
        head = "       ms  CPU ms: servers  model  tabs  postgres  redis   asked  first delta"
        return [head] + [
            f"    {at:5.0f}  {servers:15.0f} {model:6.0f} {tabs:5.0f}  {database:8.0f} {redis:6.0f}"
            f"  {asked:6.0f}  {first:11.0f}"
            for at, servers, model, tabs, database, redis, asked, first in self.rows
        ]


def main() -> None:
    import harness
    import profiles
    from fake_server import FakeServerProcess

    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", default="10,50,100,200")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument(
        "--spread", type=float, default=0.0,
        help="send the prompts at even intervals over this many seconds (0: all at once)",
    )  # fmt: skip
    parser.add_argument(
        "--layer", choices=list(LAYERS), default="memory",
        help="redis: agentweb's bus (the default with REDIS_URL); redis-pubsub: channels-redis's "
        "Pub/Sub layer; redis-queued: "
        "its list-based RedisChannelLayer",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true", help="py-spy on daphne during each N (needs py-spy)"
    )
    parser.add_argument(
        "--profile-setup", type=int, default=0, metavar="SECONDS",
        help="py-spy on daphne for this many seconds from the moment the prompts go (their "
        "set-up, before the streams), instead of the whole run (needs py-spy)",
    )  # fmt: skip
    parser.add_argument(
        "--cprofile", default="", metavar="FILE",
        help="cProfile on daphne from the moment the prompts go until every prompt reached the "
        "model: FILE (the event loop's thread) and FILE.db (the one database thread)",
    )  # fmt: skip
    parser.add_argument(
        "--timeline", type=float, default=0.0, metavar="SECONDS",
        help="every 50 ms for this many seconds from the prompts: each process's CPU, the "
        "requests the model has had, the tabs with a first delta",
    )  # fmt: skip
    parser.add_argument(
        "--cancels", type=int, default=0,
        help="this many more sessions, each cancelled by a tab on another process than its "
        "generation's while the N stream (needs --processes 2)",
    )  # fmt: skip
    parser.add_argument(
        "--processes", type=int, default=1,
        help="daphne processes behind the one Redis (the README's set-up); N is split between them",
    )  # fmt: skip
    args = parser.parse_args()
    harness.setup()
    from django.core.management import call_command

    from tests.servers import Daphne, RedisServer

    call_command("migrate", verbosity=0)
    from django.db import connection

    if args.processes > 1 and not args.layer.startswith("redis"):
        parser.error("several processes need a Redis layer: --layer redis")
    redis = RedisServer() if args.layer.startswith("redis") else None
    fake = FakeServerProcess(args.tokens, rate=args.rate, report=True)  # the model's machine
    arrivals = f"over {args.spread:g} s" if args.spread else "all at once"
    print(
        f"{args.tokens} tokens at {args.rate:g}/s per session, prompts sent {arrivals}, "
        f"{args.processes} daphne process{'es' if args.processes > 1 else ''}, "
        f"{connection.vendor}, {LAYERS[args.layer]} channel layer:"
    )
    try:
        for n in (int(value) for value in args.sessions.split(",")):
            env = server_env(fake.url, redis.url if redis else "")
            if args.layer in ("redis-pubsub", "redis-queued"):
                env["AGENTWEB_CHANNEL_LAYER"] = args.layer.removeprefix("redis-")
            program: tuple[str, ...] = ("-m", "daphne")
            if args.cprofile:
                env["AGENTWEB_CPROFILE"] = args.cprofile
                program = (str(Path(__file__).with_name("cprofiled.py")),)
            servers = [
                Daphne(f"daphne-load-{n}-{p}", program=program, **env)
                for p in range(args.processes)
            ]
            first = servers[0].process.pid
            profiling = profiles.py_spy(first) if args.profile else nullcontext()
            setup = profiles.PySpyFor(first, args.profile_setup) if args.profile_setup else None
            try:
                with profiling:
                    report = asyncio.run(
                        measure(
                            servers, fake, n, args.tokens, args.rate, args.spread, args.cancels,
                            on_prompts=setup.start if setup else None,
                            signal_burst=first if args.cprofile else 0,
                            timeline=args.timeline,
                        )
                    )  # fmt: skip
            finally:
                for server in servers:
                    server.stop()
            if setup is not None:
                setup.report()
            for line in report.timeline:
                print(line)
            print(" ", report.line())
            for error in report.errors[:3]:
                print("    error:", error)
    finally:
        fake.stop()
        if redis is not None:
            redis.stop()
    print(
        "  targets: nothing lost, no error; gap p95 < the batch interval + 100 ms (130 ms); "
        "first delta p95 < 1 s; < 100 KB a socket; < 400 MB with 200 streaming"
    )


if __name__ == "__main__":
    main()
