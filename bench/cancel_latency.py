"""How long from Cancel to the model connection closing, locally and across processes?

One run measures three ways, interleaved, and prints medians and ratios:

  in-process   one process, in-memory channel layer (the `make run` set-up)
  same-proc    daphne + Redis, the cancel sent by a tab on the generating process
  cross-proc   two daphne + Redis, the cancel sent by a tab on the other process

Each sample: start a slow reply from the fake Anthropic server, wait for tokens,
send Cancel, stop the clock when the fake server sees the connection close.
Needs redis-server. Run: .venv/bin/python bench/cancel_latency.py --runs 9
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import harness

harness.setup()  # Django on a throwaway database, before any project import

from channels.db import database_sync_to_async  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from harness import MODEL, fake_api, open_tab, signed_in_user  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from sessions import runtime, store  # noqa: E402
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
    await runtime.wait_idle()
    await tab.disconnect()
    return seconds


async def sample_processes(
    fake: FakeAnthropic, user: User, cookie: str, start: Daphne, cancel: Daphne
) -> float:
    session = await database_sync_to_async(store.new_session)(user, model=MODEL)
    headers = {"Cookie": f"sessionid={cookie}"}
    path = f"/ws/sessions/{session.pk}/"
    async with (
        connect(start.ws_url(path), additional_headers=headers, origin=start.url) as a,  # type: ignore[arg-type]
        connect(cancel.ws_url(path), additional_headers=headers, origin=cancel.url) as b,  # type: ignore[arg-type]
    ):
        fake.enqueue(Reply.slow(tokens=2000, delay=0.005))
        await a.send(json.dumps({"message": "go"}))
        await until(lambda: b.recv(), "token5 ")
        seconds = await timed_cancel(fake, b.send(json.dumps({"action": "cancel"})))
        await until(lambda: a.recv(), "Cancelled")
    return seconds


async def timed_cancel(fake: FakeAnthropic, send) -> float:
    before = fake.disconnects
    started = time.perf_counter()
    await send
    seen = await asyncio.to_thread(fake.wait_for, lambda: fake.disconnects > before, 10)
    assert seen, "the model connection was not closed"
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
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
    results: dict[str, list[float]] = {"in-process": [], "same-proc": [], "cross-proc": []}
    try:
        for _ in range(args.runs):
            results["in-process"].append(await sample_in_process(fake, user, cookie))
            results["same-proc"].append(await sample_processes(fake, user, cookie, a, a))
            results["cross-proc"].append(await sample_processes(fake, user, cookie, a, b))
    finally:
        a.stop()
        b.stop()
        redis.stop()
        fake.stop()
    base = statistics.median(results["in-process"])
    print(f"Cancel → model connection closed, {args.runs} runs each, medians:")
    for name, samples in results.items():
        median = statistics.median(samples)
        print(f"  {name:11} {median * 1000:7.1f} ms   x{median / base:5.2f} of in-process")


if __name__ == "__main__":
    asyncio.run(main())
