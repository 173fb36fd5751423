"""What reading one event of a model's stream costs when many streams arrive at once, each
event on its own (a model's pace, not a burst): the process's CPU a stream event, three ways.

  aiohttp   the floor: aiohttp's own reader, split into events, each event's JSON parsed
  sdk-raw   the SDK's cheapest read: `messages.create(stream=True)` over its aiohttp client,
            the SDK's typed events
  agentweb  agentweb's provider (`AnthropicProvider.stream`): the SDK sends the request,
            agentweb reads the body (sessions/providers/anthropic.py, sse.py)

The fake Anthropic server runs in a process of its own and sends each stream's one-token
deltas --delay seconds apart; --streams of them are read at once. Medians of interleaved runs.
First, the same three ways send --streams requests of one token at once: the CPU a request.

    .venv/bin/python bench/read_paths.py --streams 200 --tokens 200 --delay 0.025 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import harness

harness.setup()  # Django on a throwaway database, before any project import

import aiohttp  # noqa: E402
import anthropic  # noqa: E402
from fake_server import FakeServerProcess  # noqa: E402

from sessions.providers import sse  # noqa: E402
from sessions.providers.anthropic import AnthropicProvider  # noqa: E402

MESSAGES: Any = [{"role": "user", "content": "read"}]
REQUEST = {"model": harness.MODEL, "max_tokens": 64_000, "messages": MESSAGES, "stream": True}
Read = Callable[[], Awaitable[int]]
Reader = tuple[Read, Callable[[], Awaitable[None]]]  # one stream read; the client closed


def readers(url: str) -> dict[str, Callable[[], Awaitable[Reader]]]:
    async def floor() -> Reader:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}

        async def read() -> int:
            async with session.post(f"{url}/v1/messages", json=REQUEST, headers=headers) as got:
                return await _parsed(sse.events(got.content.iter_any()))

        return read, session.close

    async def sdk_raw() -> Reader:
        client = anthropic.AsyncAnthropic(
            api_key="k", base_url=url, max_retries=0, http_client=anthropic.DefaultAioHttpClient()
        )

        async def read() -> int:
            stream = await client.messages.create(
                model=harness.MODEL, max_tokens=64_000, messages=MESSAGES, stream=True
            )
            return sum([1 async for _ in stream])

        return read, client.close

    async def agentweb() -> Reader:
        provider = AnthropicProvider(model=harness.MODEL, api_key="k", base_url=url, max_retries=0)

        async def read() -> int:
            return sum([1 async for _ in provider.stream(MESSAGES)])

        return read, provider._client().close

    return {"aiohttp": floor, "sdk-raw": sdk_raw, "agentweb": agentweb}


async def _parsed(events: AsyncIterator[tuple[str, str]]) -> int:
    count = 0
    async for _, data in events:
        json.loads(data)
        count += 1
    return count


async def cpu_reading(make: Callable[[], Awaitable[Reader]], streams: int) -> tuple[float, int]:
    """Seconds of this process's CPU to read `streams` at once (after one to warm up), and the
    events they held."""
    read, close = await make()
    await read()
    started = time.process_time()
    counts = await asyncio.gather(*(read() for _ in range(streams)))
    spent = time.process_time() - started
    await close()
    return spent, sum(counts)


def medians(tokens: int, delay: float, streams: int, runs: int) -> dict[str, tuple[float, int]]:
    """Each way's median CPU (and the events read) over `runs` interleaved runs, the fake
    server sending `tokens` events `delay` seconds apart."""
    fake = FakeServerProcess(tokens, delay)
    try:
        ways = readers(fake.url)
        spent: dict[str, list[tuple[float, int]]] = {name: [] for name in ways}
        for _ in range(runs):
            for name, make in ways.items():
                spent[name].append(asyncio.run(cpu_reading(make, streams)))
    finally:
        fake.stop()
    return {
        name: (statistics.median(cpu for cpu, _ in values), values[0][1])
        for name, values in spent.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.025)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    requests = medians(1, 0.0, args.streams, args.runs)
    print(f"{args.streams} requests of one token at once: CPU a request (median of {args.runs})")
    for name, (cpu, _) in requests.items():
        print(f"  {name:9} {cpu * 1000 / args.streams:6.2f} ms")
    events = {
        name: cpu * 1e6 / count
        for name, (cpu, count) in medians(args.tokens, args.delay, args.streams, args.runs).items()
    }
    print(
        f"{args.streams} streams at once, {args.tokens} one-token events each, "
        f"{args.delay * 1000:g} ms apart: CPU an event (median of {args.runs})"
    )
    for name, each in events.items():
        print(f"  {name:9} {each:6.1f} µs  ×{each / events['aiohttp']:.2f} of aiohttp's own reader")


if __name__ == "__main__":
    main()
