"""What does a tool call cost through agentweb, against the `mcp` client calling the same server
directly? And do 50 sessions calling tools at once each get their own results?

1. Round trip: the model's reply ends with a `tool_use` of a read-only tool (no approval wait);
   agentweb saves the reply, calls the MCP server (the tests' own, over stdio), stores the
   result and sends the next request. Measured at the fake Anthropic server: from the end of
   the reply's stream to the arrival of the request that carries the result. Against it: the
   SDK's `Client.call_tool` of the same tool on the same kind of server, timed alone. Target:
   agentweb ≤ 1.2 × direct + 5 ms. Medians and p95 of `--runs` samples each, interleaved.
2. Load: `--sessions` sessions prompt at once; each model calls `echo` with its session's own
   word; every result must reach its own session (in the next request and in the database).

Run: .venv/bin/python bench/mcp_calls.py --runs 30 --sessions 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import harness

harness.setup()  # Django on a throwaway database, before any project import

from django.conf import settings  # noqa: E402
from harness import fake_api, open_tab, signed_in_user  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from sessions import generation  # noqa: E402
from sessions.mcp import hub  # noqa: E402
from sessions.models import Entry  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, Reply  # noqa: E402
from tests.mcp_servers import servers_file, workshop_spec  # noqa: E402

NOTES = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
WORKSHOP = StdioServerParameters(**workshop_spec(NOTES))  # the same server, for the SDK's own call


def configure() -> None:
    settings.AGENTWEB_MCP_SERVERS = servers_file(NOTES, workshop=workshop_spec(NOTES))


async def until(tab: Any, needle: str) -> None:
    text = ""
    async with asyncio.timeout(30):
        while needle not in text:
            text += await tab.receive_from(30)


async def through_agentweb(fake: FakeAnthropic, user: Any, cookie: str, n: int) -> float:
    """Seconds from the tool_use reply's end to the next request's arrival."""
    fake.reset()
    fake.keep_alive = True  # as the API does: the next request goes on the same connection
    fake.enqueue(Reply.tool("mcp__workshop__echo", {"text": f"w{n}"}), Reply.text(f"done {n}"))
    tab = await open_tab(user, cookie)
    await tab.send_to(text_data=json.dumps({"message": "echo it"}))
    await until(tab, f"done {n}</p>")
    await generation.wait_idle()
    await tab.disconnect()
    first, second = fake.requests[0], fake.requests[1]
    return second["arrived"] - first["ended"]


async def direct(client: Client, n: int) -> float:
    started = time.perf_counter()
    await client.call_tool("echo", {"text": f"w{n}"})
    return time.perf_counter() - started


async def round_trips(fake: FakeAnthropic, user: Any, cookie: str, runs: int) -> None:
    await hub.hub().tools()  # connected once per process, as agentweb's servers are
    ours: list[float] = []
    theirs: list[float] = []
    async with Client(stdio_client(WORKSHOP)) as client:
        for n in range(runs + 2):  # two warm-ups each
            a, b = await through_agentweb(fake, user, cookie, n), await direct(client, n)
            if n >= 2:
                ours.append(a)
                theirs.append(b)
    m_ours, m_theirs = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))] * 1000  # noqa: E731
    target = 1.2 * m_theirs + 5
    print(f"round trip, {runs} runs each, interleaved (ms):")
    print(f"  through agentweb  median {m_ours:7.2f}  p95 {p95(ours):7.2f}")
    print(f"  mcp client alone  median {m_theirs:7.2f}  p95 {p95(theirs):7.2f}")
    verdict = "met" if m_ours <= target else "missed"
    print(f"  ratio {m_ours / m_theirs:.2f}x; target <= 1.2x + 5 ms = {target:.2f} ms: {verdict}")


async def many(fake: FakeAnthropic, user: Any, cookie: str, sessions: int) -> None:
    """Every session's model calls echo with its own word; each result reaches its own."""
    fake.reset()

    def respond(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
        result = next((b for b in blocks if b.get("type") == "tool_result"), None)
        if result is not None:
            return Reply.text(f"got {result['content']} end")
        word = next(b["text"] for b in blocks if b.get("type") == "text").split()[-1]
        return Reply.tool("mcp__workshop__echo", {"text": word})

    fake.responder = respond
    tabs = [await open_tab(user, cookie) for _ in range(sessions)]
    started = time.perf_counter()
    await asyncio.gather(
        *(t.send_to(text_data=json.dumps({"message": f"say s{n}"})) for n, t in enumerate(tabs))
    )
    await asyncio.gather(*(until(t, f"got s{n} end</p>") for n, t in enumerate(tabs)))
    await generation.wait_idle()
    seconds = time.perf_counter() - started
    for tab in tabs:
        await tab.disconnect()

    def stored() -> list[tuple[int, str, str]]:
        results = Entry.objects.filter(role="toolResult", session__title__startswith="say ")
        results = results.select_related("session")
        return [(r.session_id, r.text, r.session.title) for r in results]

    from channels.db import database_sync_to_async

    rows = await database_sync_to_async(stored)()
    wrong = [row for row in rows if row[2] != f"say {row[1]}"]
    print(f"{sessions} sessions calling a tool at once: {len(rows)} results in {seconds:.2f} s;")
    print(f"  each in its own session: {'yes' if not wrong and len(rows) == sessions else wrong}")
    if wrong or len(rows) != sessions:
        raise SystemExit(1)


async def main(runs: int, sessions: int) -> None:
    configure()
    fake = fake_api()
    user, cookie = await signed_in_user()
    try:
        await round_trips(fake, user, cookie, runs)
        await many(fake, user, cookie, sessions)
    finally:
        await hub.close()
        fake.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.sessions))
