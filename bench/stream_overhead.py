"""How much does agentweb add to reading a model stream?

Streams the same reply (N text deltas, no delay) from the local fake Anthropic
server three ways, in one run, and prints medians and ratios:

  sdk       the raw SDK: `AsyncAnthropic().messages.stream()` text events
  sdk-raw   the cheapest SDK read: `messages.create(stream=True)` over aiohttp (agentweb's)
  provider  agentweb's AnthropicProvider (error mapping, usage)
  browser   the whole path: prompt over a WebSocket → job → provider →
            channel layer → consumer → frames received by the tab, and
            both messages persisted

Run: make bench   (or .venv/bin/python bench/stream_overhead.py --tokens 2000 --runs 7)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import harness

harness.setup()  # Django on a throwaway database, before any project import

import anthropic  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from harness import MODEL, fake_api, open_tab, signed_in_user  # noqa: E402

from sessions import generation  # noqa: E402
from sessions.providers.anthropic import AnthropicProvider  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, Reply  # noqa: E402

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "bench"}]}]
MAX = 8_192  # the max_tokens agentweb asks for: the fake server stops there, as the API does


_sdk_clients: dict[str, anthropic.AsyncAnthropic] = {}


async def via_sdk(fake: FakeAnthropic, tokens: int) -> int:
    """The raw SDK, reading with one client it keeps (as agentweb does): the harder baseline."""
    if fake.url not in _sdk_clients:
        _sdk_clients[fake.url] = anthropic.AsyncAnthropic(
            api_key="k", base_url=fake.url, max_retries=0
        )
    client = _sdk_clients[fake.url]
    count = 0
    started = time.perf_counter()
    async with client.messages.stream(model=MODEL, max_tokens=MAX, messages=MESSAGES) as stream:
        async for event in stream:
            if event.type == "text":
                if not count:
                    FIRST.setdefault("sdk", []).append(time.perf_counter() - started)
                count += 1
    return count


_raw_clients: dict[str, anthropic.AsyncAnthropic] = {}


async def via_sdk_raw(fake: FakeAnthropic, tokens: int) -> int:
    """The cheapest read the SDK offers, as agentweb reads: the raw event stream over aiohttp."""
    if fake.url not in _raw_clients:
        _raw_clients[fake.url] = anthropic.AsyncAnthropic(
            api_key="k",
            base_url=fake.url,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(),
        )
    events = await _raw_clients[fake.url].messages.create(
        model=MODEL, max_tokens=MAX, messages=MESSAGES, stream=True
    )
    count = 0
    async with events:
        async for event in events:
            count += event.type == "content_block_delta"
    return count


FIRST: dict[str, list[float]] = {}  # time to the first token, per path


async def via_provider(fake: FakeAnthropic, tokens: int) -> int:
    provider = AnthropicProvider(model=MODEL, api_key="k", base_url=fake.url, max_retries=0)
    return len([event async for event in provider.stream(MESSAGES) if hasattr(event, "text")])


async def via_browser(fake: FakeAnthropic, tokens: int, user: User, cookie: str) -> int:
    tab = await open_tab(user, cookie)
    await tab.receive_from(5)  # the initial sync
    started = time.perf_counter()
    await tab.send_to(text_data=json.dumps({"message": "bench"}))
    frames = 0
    while True:
        html = await tab.receive_from(10)
        if 'id="live-text" hx-swap-oob="beforeend"' in html and not frames:
            FIRST.setdefault("browser", []).append(time.perf_counter() - started)
            frames += 1
        if "entry--assistant status--complete" in html:  # the reply's final entry
            break
    await generation.wait_idle()
    await tab.disconnect()
    return frames


async def measure(name: str, run, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    user, cookie = await signed_in_user()
    fake = fake_api()

    def reply() -> None:
        fake.enqueue(Reply(chunks=[f"t{i} " for i in range(args.tokens)]))

    def whole(name: str, count: int) -> None:
        if count != args.tokens:  # a read that stopped early would time less than the stream
            raise SystemExit(f"{name} read {count} of the {args.tokens} deltas")

    async def sdk() -> None:
        reply()
        whole("sdk", await via_sdk(fake, args.tokens))

    async def sdk_raw() -> None:
        reply()
        whole("sdk-raw", await via_sdk_raw(fake, args.tokens))

    async def provider() -> None:
        reply()
        whole("provider", await via_provider(fake, args.tokens))

    async def browser() -> None:
        reply()
        await via_browser(fake, args.tokens, user, cookie)

    await sdk()  # warm up imports and connections
    results = {}
    # Interleave the three so machine noise hits them alike.
    for _ in range(args.runs):
        for name, run in (
            ("sdk", sdk),
            ("sdk-raw", sdk_raw),
            ("provider", provider),
            ("browser", browser),
        ):
            results.setdefault(name, []).extend(await measure(name, run, 1))
    fake.stop()
    for client in _raw_clients.values():
        await client.close()
    base = statistics.median(results["sdk"])
    raw = statistics.median(results["sdk-raw"])
    print(f"{args.tokens} deltas, {args.runs} runs each, medians:")
    for name, times in results.items():
        median = statistics.median(times)
        print(
            f"  {name:9} {median * 1000:8.1f} ms  {args.tokens / median:9.0f} deltas/s"
            f"  x{median / base:5.2f} of raw SDK  x{median / raw:5.2f} of sdk-raw"
        )
    overhead = statistics.median(FIRST["browser"]) - statistics.median(FIRST["sdk"])
    print(
        f"  time to the first token: raw SDK {statistics.median(FIRST['sdk']) * 1000:.1f} ms, "
        f"prompt frame to first delta {statistics.median(FIRST['browser']) * 1000:.1f} ms: "
        f"overhead {overhead * 1000:.1f} ms (target < 15 ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
