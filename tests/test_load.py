"""Load, at a CI-sized N: sessions streaming at once through one daphne process (bench/load.py
runs N up to 200 with `make load`). Every token reaches every tab, in order, with no error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.load import measure, server_env

from .servers import Daphne

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_ten_sessions_streaming_at_once_lose_no_token(django_db_setup: Any, fake_server):
    fake_server.reset()
    server = Daphne("daphne-load", **server_env(fake_server.url, 10))
    try:
        report = await measure(server, fake_server, sessions=10, tokens=60, rate=40)
    finally:
        await asyncio.to_thread(server.stop)
    print(report.line())  # the figures, for the log; timings are measured by bench/load.py
    assert report.errors == []
    assert report.lost == 0
    assert all(len(tab.deltas) > 1 for tab in report.tabs)  # it streamed, in several deltas
    assert report.rss_after_kb > 0
