"""Relay, browser included: how long a page takes to show every token of a fast stream, against
the raw anthropic SDK reading the same stream (target 1 of docs/PERFORMANCE.md: at most 1.10×).

The fake Anthropic server runs in a process of its own and sends N one-token text deltas as fast
as it can. Timed, in turn, in one run (medians of interleaved tries):

  sdk        the SDK as its documentation shows it: `messages.stream()`, default HTTP client
  sdk-raw    the cheapest read the SDK offers: `messages.create(stream=True)` over aiohttp (what
             agentweb uses): the harder baseline
  browser    Chromium on a session page: the prompt submitted in the page until the page shows
             the last token (a MutationObserver's clock), through daphne in its own process

It checks that the page shows every token, in order, and reports the page's side: the WebSocket
frames it received (and how many a second), the main-thread time each took (htmx's parse and
swap, from its wsBeforeMessage to its wsAfterMessage), and the longest task (PerformanceObserver).

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
window.__relay = { start: null, done: null, frames: [], handling: [], tasks: [], open: false };
document.addEventListener("htmx:wsOpen", () => { window.__relay.open = true; });
let received = 0;
document.addEventListener("htmx:wsBeforeMessage", () => { received = performance.now(); });
document.addEventListener("htmx:wsAfterMessage", () => {
  const now = performance.now();
  window.__relay.frames.push(now);
  window.__relay.handling.push(now - received);  // the frame's parse and swap, main thread
});
new PerformanceObserver((list) => {
  for (const task of list.getEntries()) window.__relay.tasks.push([task.startTime, task.duration]);
}).observe({ type: "longtask" });
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


class Shown:
    """One run in the page: seconds to the last token, and what the page's main thread did."""

    def __init__(self, relay: dict[str, Any]) -> None:
        start, done = relay["start"], relay["done"]
        self.seconds = (done - start) / 1000
        kept = [i for i, t in enumerate(relay["frames"]) if start <= t <= done]
        self.frames = len(kept)
        self.per_second = self.frames / self.seconds if self.seconds else 0.0
        handling = [relay["handling"][i] for i in kept]
        self.handling_median = statistics.median(handling) if handling else 0.0
        self.handling_max = max(handling, default=0.0)
        tasks = [length for at, length in relay["tasks"] if start <= at <= done]
        self.longest_task = max(tasks, default=0.0)  # tasks of 50 ms or more only


def show_in_page(page: Any, server: Daphne, user: User, tokens: int) -> Shown:
    """Submit the prompt and wait until the page shows the last token, every token in order."""
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
    return Shown(page.evaluate("() => window.__relay"))


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
    shown: list[Shown] = []
    try:
        with sync_playwright() as playwright:
            browser, page = harness.chromium_page(playwright, server.url, cookie, WATCH)
            on_loop(read_sdk_raw(sdk_raw))  # warm up
            show_in_page(page, server, user, args.tokens)  # warm up
            for _ in range(args.runs):  # interleaved, so noise hits all three alike
                times["sdk"].append(on_loop(read_sdk(sdk)))
                times["sdk-raw"].append(on_loop(read_sdk_raw(sdk_raw)))
                run = show_in_page(page, server, user, args.tokens)
                times["browser"].append(run.seconds)
                shown.append(run)
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

    def median(figure: str) -> float:
        return statistics.median(getattr(run, figure) for run in shown)

    print(
        f"  the page: {median('frames'):.0f} frames, {median('per_second'):.0f} a second; "
        f"main thread a frame (its parse and swap) median {median('handling_median'):.2f} ms, "
        f"longest {median('handling_max'):.1f} ms; longest task "
        f"{median('longest_task'):.0f} ms (0: none of 50 ms or more)"
    )
    print("  target: browser ≤ 1.10× the raw SDK read")


if __name__ == "__main__":
    main()
