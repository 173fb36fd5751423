"""Relay, browser included: how long a page takes to show every token of a fast stream, against
the raw anthropic SDK reading the same stream (target 1 of docs/PERFORMANCE.md: at most 1.10×).

The fake Anthropic server runs in a process of its own and sends N one-token text deltas as fast
as it can. Timed, in turn, in one run (medians of interleaved tries):

  sdk        the SDK as its documentation shows it: `messages.stream()`, default HTTP client
  sdk-raw    the cheapest read the SDK offers: `messages.create(stream=True)` over aiohttp (what
             agentweb uses): the harder baseline
  browser    Chromium on a session page: the prompt submitted in the page until the page shows
             the last token (a MutationObserver's clock), through daphne in its own process

It checks that the page shows every token, in order, and reports the WebSocket frames a second
the page received.

    .venv/bin/python bench/relay_browser.py --tokens 20000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import statistics
import time
from typing import Any

import harness
import profiles

harness.setup()  # Django on a throwaway database, before any project import

import anthropic  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from fake_server import FakeServerProcess  # noqa: E402

from sessions.models import ChatSession  # noqa: E402
from tests.servers import Daphne  # noqa: E402

MESSAGES: Any = [{"role": "user", "content": "relay"}]

WATCH = """
window.__relay = { start: null, done: null, frames: [], open: false };
document.addEventListener("htmx:wsOpen", () => { window.__relay.open = true; });
document.addEventListener("htmx:wsAfterMessage", () => {
  window.__relay.frames.push(performance.now());
});
document.addEventListener("DOMContentLoaded", () => {
  new MutationObserver((records) => {
    if (window.__relay.done !== null) return;
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (node.textContent && node.textContent.includes(window.__relay.last)) {
          window.__relay.done = performance.now();
          return;
        }
      }
    }
  }).observe(document.body, { childList: true, subtree: true });
});
"""

SEND = """(last) => {
  window.__relay.last = last;
  const box = document.querySelector("#message");
  box.value = "relay";
  window.__relay.start = performance.now();
  box.form.requestSubmit();
}"""


async def read_sdk(client: anthropic.AsyncAnthropic) -> float:
    started = time.perf_counter()
    async with client.messages.stream(model="m", max_tokens=10, messages=MESSAGES) as stream:
        async for _ in stream.text_stream:
            pass
    return time.perf_counter() - started


async def read_sdk_raw(client: anthropic.AsyncAnthropic) -> float:
    started = time.perf_counter()
    events = await client.messages.create(model="m", max_tokens=10, messages=MESSAGES, stream=True)
    async with events:
        async for _ in events:
            pass
    return time.perf_counter() - started


def show_in_page(page: Any, server: Daphne, user: User, tokens: int) -> tuple[float, float]:
    """Seconds from submit to the last token shown; the most frames the page got in a second."""
    session = ChatSession.objects.create(owner=user, model=harness.MODEL)
    page.goto(f"{server.url}{session.get_absolute_url()}")
    page.wait_for_function("() => window.__relay.open")
    page.evaluate(SEND, f"t{tokens - 1} ")
    page.wait_for_function("() => window.__relay.done !== null", timeout=300_000, polling=200)
    page.wait_for_selector(".entry--assistant.status--complete", timeout=300_000)
    shown = page.inner_text(".entry--assistant.status--complete .markdown").split()
    expected = [f"t{i}" for i in range(tokens)]
    if shown != expected:
        wrong = next(i for i, (a, b) in enumerate(zip(shown, expected, strict=False)) if a != b)
        raise SystemExit(
            f"the page did not show every token in order: {len(shown)} shown, "
            f"{shown[wrong - 2 : wrong + 3]} where {expected[wrong - 2 : wrong + 3]} was sent"
        )
    relay = page.evaluate("() => window.__relay")
    frames = [t for t in relay["frames"] if relay["start"] <= t <= relay["done"]]
    busiest = max(
        (sum(1 for t in frames if start <= t < start + 1000) for start in frames), default=0
    )
    return (relay["done"] - relay["start"]) / 1000, busiest


def main() -> None:
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # ORM calls beside Playwright's loop
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true",
        help="then one more run, profiled: py-spy on daphne, Chromium's main thread (needs py-spy)",
    )  # fmt: skip
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = User.objects.create_user("relay")
    cookie = harness.cookie_for(user)

    fake = FakeServerProcess(args.tokens)
    server = Daphne(
        "daphne-relay",
        AGENTWEB_MODEL=harness.MODEL,
        ANTHROPIC_API_KEY="k",
        ANTHROPIC_BASE_URL=fake.url,
        AGENTWEB_MAX_RETRIES="0",
    )
    sdk = anthropic.AsyncAnthropic(api_key="k", base_url=fake.url, max_retries=0)
    sdk_raw = anthropic.AsyncAnthropic(
        api_key="k", base_url=fake.url, max_retries=0, http_client=anthropic.DefaultAioHttpClient()
    )
    loop = asyncio.new_event_loop()  # the SDK's, in a thread: Playwright runs a loop of its own
    thread = concurrent.futures.ThreadPoolExecutor(1)

    def on_loop(read: Any) -> float:
        return thread.submit(loop.run_until_complete, read).result()

    times: dict[str, list[float]] = {"sdk": [], "sdk-raw": [], "browser": []}
    busiest: list[float] = []
    try:
        with sync_playwright() as playwright:
            browser, page = harness.chromium_page(playwright, server.url, cookie, WATCH)
            on_loop(read_sdk_raw(sdk_raw))  # warm up
            show_in_page(page, server, user, args.tokens)  # warm up
            for _ in range(args.runs):  # interleaved, so noise hits all three alike
                times["sdk"].append(on_loop(read_sdk(sdk)))
                times["sdk-raw"].append(on_loop(read_sdk_raw(sdk_raw)))
                seconds, frames = show_in_page(page, server, user, args.tokens)
                times["browser"].append(seconds)
                busiest.append(frames)
            if args.profile:
                print(f"one profiled run of {args.tokens:,} deltas:")
                with profiles.py_spy(server.process.pid), profiles.chromium(page):
                    show_in_page(page, server, user, args.tokens)
            browser.close()
    finally:
        on_loop(sdk_raw.close())
        server.stop()
        fake.stop()
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.tokens:,} one-token deltas, {args.runs} interleaved runs, medians:")
    for name, median in medians.items():
        print(
            f"  {name:8} {median * 1000:9.1f} ms  ×{median / medians['sdk']:.2f} of sdk  "
            f"×{median / medians['sdk-raw']:.2f} of sdk-raw"
        )
    print(
        f"  the page received at most {statistics.median(busiest):.0f} frames in a second "
        "(median over runs; target about 30)"
    )
    print("  target: browser ≤ 1.10× the raw SDK read")


if __name__ == "__main__":
    main()
