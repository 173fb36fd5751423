"""Load, at a CI-sized N: sessions streaming at once through one daphne process, and through two
behind one Redis (bench/load.py runs N up to 200, and 400 over two processes, with `make
bench`). Every token reaches every tab, in order, with no error."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from bench.fake_server import paced
from bench.load import measure, server_env

from .servers import Daphne, RedisServer

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_ten_sessions_streaming_at_once_lose_no_token(django_db_setup: Any, fake_server):
    fake_server.reset()
    fake_server.responder = paced(tokens=60, rate=40)
    server = Daphne("daphne-load", **server_env(fake_server.url))
    try:
        report = await measure(server, fake_server, sessions=10, tokens=60, rate=40)
    finally:
        await asyncio.to_thread(server.stop)
    print(report.line())  # the figures, for the log; timings are measured by bench/load.py
    assert report.errors == []
    assert report.lost == 0
    assert all(len(tab.deltas) > 1 for tab in report.tabs)  # it streamed, in several deltas
    assert all(tab.sent_at < tab.asked_at < tab.deltas[0][0] for tab in report.tabs)
    assert report.rss_after_kb > 0


async def test_two_processes_behind_one_redis_split_the_tabs_lose_no_token_and_cancel_across(
    django_db_setup: Any, fake_server
):
    fake_server.reset()
    fake_server.responder = paced(tokens=40, rate=40)
    redis = await asyncio.to_thread(RedisServer)
    env = server_env(fake_server.url, redis.url)
    servers = [Daphne(f"daphne-load-{n}", **env) for n in (1, 2)]
    try:
        report = await measure(servers, fake_server, sessions=8, tokens=40, rate=40, cancels=2)
    finally:
        for server in servers:
            await asyncio.to_thread(server.stop)
        await asyncio.to_thread(redis.stop)
    print(report.line())
    assert report.errors == []
    assert report.lost == 0
    assert all(len(tab.deltas) > 1 for tab in report.tabs)
    assert report.cpu_seconds > 0
    # each cancel, sent from the other process, closed its model connection and showed
    assert len(report.cancels) == 2
    assert all(closed != math.inf and shown > 0 for closed, shown, _ in report.cancels)
