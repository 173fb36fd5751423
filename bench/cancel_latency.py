"""How long from Cancel to the model connection closing, locally and across processes?

One run measures three ways, interleaved, and prints medians and ratios:

  in-process   one process, in-memory channel layer (the `make run` set-up)
  same-proc    daphne + Redis, the cancel sent by a tab on the generating process
  cross-proc   two daphne + Redis, the cancel sent by a tab on the other process

Each sample: start a slow reply from the fake Anthropic server, wait for tokens,
send Cancel, stop the clock when the fake server sees the connection close. Two more:
Cancel during /handoff until `Handoff cancelled` shows in the page (same process, and
across processes through Redis). Prints medians and p95.
Needs redis-server. Run: .venv/bin/python bench/cancel_latency.py --runs 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import harness

harness.setup()  # Django on a throwaway database, before any project import

from channels.db import database_sync_to_async  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from harness import MODEL, fake_api, open_tab, signed_in_user  # noqa: E402
from websockets.asyncio.client import ClientConnection, connect  # noqa: E402

from sessions import generation  # noqa: E402
from sessions.models import ChatSession  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, Reply  # noqa: E402
from tests.servers import Daphne, RedisServer  # noqa: E402


async def until(receive, needle: str) -> None:
    text = ""
    async with asyncio.timeout(15):
        while needle not in text:
            text += await receive()


async def sample_in_process(fake: FakeAnthropic, user: User, cookie: str) -> float:
    tab = await open_tab(user, cookie)
    fake.enqueue(Reply.slow(tokens=2000, delay=0.005))
    await tab.send_to(text_data=json.dumps({"message": "go"}))
    await until(lambda: tab.receive_from(15), "token5 ")
    seconds = await timed_cancel(fake, tab.send_to(text_data=json.dumps({"action": "cancel"})))
    await generation.wait_idle()
    await tab.disconnect()
    return seconds


@contextlib.asynccontextmanager
async def two_tabs(
    session: Any, cookie: str, start: Daphne, cancel: Daphne
) -> AsyncIterator[tuple[ClientConnection, ClientConnection]]:
    """A tab on the process that generates, and one on the process that cancels."""
    headers = {"Cookie": f"sessionid={cookie}"}
    path = f"/ws/sessions/{session.pk}/"
    async with (
        connect(start.ws_url(path), additional_headers=headers, origin=start.url) as a,  # type: ignore[arg-type]
        connect(cancel.ws_url(path), additional_headers=headers, origin=cancel.url) as b,  # type: ignore[arg-type]
    ):
        yield a, b


async def sample_processes(
    fake: FakeAnthropic, user: User, cookie: str, start: Daphne, cancel: Daphne
) -> float:
    session = await database_sync_to_async(ChatSession.objects.create)(owner=user, model=MODEL)
    async with two_tabs(session, cookie, start, cancel) as (a, b):
        fake.enqueue(Reply.slow(tokens=2000, delay=0.005))
        await a.send(json.dumps({"message": "go"}))
        await until(lambda: b.recv(), "token5 ")
        seconds = await timed_cancel(fake, b.send(json.dumps({"action": "cancel"})))
        await until(lambda: a.recv(), "Cancelled")
    return seconds


async def sample_handoff_in_page(
    fake: FakeAnthropic, user: User, cookie: str, start: Daphne, cancel: Daphne
) -> float:
    """Cancel during /handoff: the clock stops when the cancelling tab shows `Handoff cancelled`."""
    session = await database_sync_to_async(ChatSession.objects.create)(owner=user, model=MODEL)
    for role, text in (("user", "question"), ("assistant", "answer")):
        await database_sync_to_async(session.append_message)(role, [{"type": "text", "text": text}])
    async with two_tabs(session, cookie, start, cancel) as (a, b):
        fake.enqueue(Reply.slow(tokens=2000, delay=0.005))
        await a.send(json.dumps({"message": "/handoff"}))
        await until(lambda: b.recv(), "token5 ")
        started = time.perf_counter()
        await b.send(json.dumps({"action": "cancel"}))
        await until(lambda: b.recv(), "Handoff cancelled")
        return time.perf_counter() - started


async def timed_cancel(fake: FakeAnthropic, send) -> float:
    before = fake.disconnects
    started = time.monotonic()
    await send
    seen = await asyncio.to_thread(fake.wait_for, lambda: fake.disconnects > before, 10)
    assert seen, "the model connection was not closed"
    return fake.disconnected_at[-1] - started  # the moment the model's server saw it close


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    user, cookie = await signed_in_user()
    fake = fake_api()
    redis = RedisServer()
    env = {
        "REDIS_URL": redis.url,
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "k",
        "AGENTWEB_MAX_RETRIES": "0",
        "AGENTWEB_MODEL": MODEL,
    }
    a, b = Daphne("bench-a", **env), Daphne("bench-b", **env)
    results: dict[str, list[float]] = {
        "in-process": [],
        "same-proc": [],
        "cross-proc": [],
        "handoff page": [],
        "handoff x-proc": [],
    }
    try:
        for _ in range(args.runs):
            results["in-process"].append(await sample_in_process(fake, user, cookie))
            results["same-proc"].append(await sample_processes(fake, user, cookie, a, a))
            results["cross-proc"].append(await sample_processes(fake, user, cookie, a, b))
            results["handoff page"].append(await sample_handoff_in_page(fake, user, cookie, a, a))
            results["handoff x-proc"].append(await sample_handoff_in_page(fake, user, cookie, a, b))
    finally:
        a.stop()
        b.stop()
        redis.stop()
        fake.stop()
    print(f"{args.runs} runs each (the first three: Cancel → model connection closed, target")
    print("p95 < 50 ms; the last two: Cancel → `Handoff cancelled` in the page, p95 < 100 ms):")
    for name, samples in results.items():
        ordered = sorted(samples)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        median = statistics.median(samples)
        print(f"  {name:14} median {median * 1000:6.1f} ms   p95 {p95 * 1000:6.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
