"""Does the browser stay responsive on a 10,000-entry session? In Chromium, for the session
page and side by side (old session of N entries, its handoff, the new one): the time to the
page's load event, its longest main-thread task, and its total blocking time (the sum of every
task's time past 50 ms, as Lighthouse counts it), each the median of a few loads.

Target (docs/PERFORMANCE.md, 6; issue 21): the page stays responsive: no main-thread task over
100 ms, and total blocking time under 200 ms ("good" for Lighthouse).

    .venv/bin/python bench/page_browser.py --sizes 1000,10000 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import harness

harness.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from sizes import DOCUMENT, long_session  # noqa: E402

from sessions.models import ChatSession  # noqa: E402
from tests.servers import Daphne  # noqa: E402

WATCH = """
window.__tasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__tasks.push(entry.duration);
}).observe({ type: "longtask", buffered: true });
"""

FIGURES = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const tasks = window.__tasks;
  return {
    load: nav.loadEventEnd,
    longest: tasks.length ? Math.max(...tasks) : 0,
    blocking: tasks.reduce((sum, t) => sum + Math.max(0, t - 50), 0),
  };
}"""


def visit(page: Any, url: str, runs: int) -> str:
    samples = []
    for _ in range(runs):
        page.goto(url, wait_until="load")
        page.wait_for_timeout(500)  # tasks right after the load event count too
        samples.append(page.evaluate(FIGURES))
    load, longest, blocking = (
        statistics.median(sample[name] for sample in samples)
        for name in ("load", "longest", "blocking")
    )
    return f"load {load:6.0f} ms, longest task {longest:4.0f} ms, blocking {blocking:4.0f} ms"


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = User.objects.create_user("pages")
    cookie = harness.cookie_for(user)
    sessions = []
    for size in (int(value) for value in args.sizes.split(",")):
        old = long_session(user, size)
        harness.time_switches(old, DOCUMENT, 1)  # a handoff: side by side has a pair to show
        new = ChatSession.objects.filter(parent_session=old).latest("pk")
        sessions.append((size, old, new))
    server = Daphne("daphne-pages", AGENTWEB_MODEL="local", ANTHROPIC_API_KEY="")
    print(f"Chromium, medians of {args.runs} loads:")
    try:
        with sync_playwright() as playwright:
            browser, page = harness.chromium_page(playwright, server.url, cookie, WATCH)
            for size, old, new in sessions:
                session_page = f"{server.url}{old.get_absolute_url()}"
                compare = f"{server.url}/sessions/{old.pk}/compare/{new.pk}/"
                page.goto(compare)  # the coverage report, computed once and cached
                print(f"  {size:6,} entries  session page: {visit(page, session_page, args.runs)}")
                print(f"  {size:6,} entries  side by side: {visit(page, compare, args.runs)}")
            browser.close()
    finally:
        server.stop()
    print("  target: no task over 100 ms, blocking < 200 ms")


if __name__ == "__main__":
    main()
