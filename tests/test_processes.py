"""Generations outlive pages and processes: two daphnes, one Redis, one database (B7, B8, B12).

These start real servers on loopback: redis-server, and daphne processes that
talk to the fake Anthropic server through the real SDK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from sessions.models import ChatSession, Entry

from .conftest import claude_env, db_async, make_session
from .fake_anthropic import FakeAnthropic, Reply
from .servers import Daphne, RedisServer
from .test_recovery import saved_partial

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def model_env(fake: FakeAnthropic, redis: RedisServer, **extra: str) -> dict[str, str]:
    return {"REDIS_URL": redis.url, **claude_env(fake.url), **extra}


@pytest.fixture(scope="module")
def pair(
    django_db_setup: Any, fake_server: FakeAnthropic, redis: RedisServer
) -> Iterator[tuple[Daphne, Daphne]]:
    a = Daphne("daphne-a", **model_env(fake_server, redis))
    b = Daphne("daphne-b", **model_env(fake_server, redis))
    yield a, b
    a.stop()
    b.stop()


async def wait_until(predicate: Any, timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (result := await db_async(predicate)()):
            await asyncio.sleep(0.05)
    return result


async def test_a_handoff_started_in_one_process_is_cancelled_from_another(
    owner, fake_anthropic, pair, open_socket
):
    a, b = pair
    fake_anthropic.enqueue(Reply.held_tokens(4, 396))
    old = await db_async(make_session)(owner, exchanges=1)
    tab_a = await open_socket(a, owner, old)
    tab_b = await open_socket(b, owner, old)
    await tab_a.send(message="/handoff")
    await tab_a.until("token3 ")  # the stream is held there
    await tab_b.until("token3 ")  # the other process's tab streams too
    await tab_b.send(action="cancel")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await tab_a.until("Handoff cancelled")
    await tab_b.until("Handoff cancelled")
    assert await db_async(ChatSession.objects.count)() == 1
    reply = await wait_until(
        lambda: Entry.objects.filter(session=old, status=Entry.Status.ABORTED).first()
    )
    assert reply.text.startswith("token0 token1 token2")


async def test_a_handoff_completes_its_switch_after_the_starting_tab_closes(
    owner, fake_anthropic, pair, open_socket
):
    a, _ = pair
    fake_anthropic.enqueue(Reply.held(["## Goal\n"], ["Go on."]))
    old = await db_async(make_session)(owner, exchanges=1)
    tab = await open_socket(a, owner, old)
    await tab.send(message="/handoff")
    await tab.until("Generating handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the document is held
    await tab.connection.close()
    fake_anthropic.release()
    new = await wait_until(lambda: ChatSession.objects.filter(parent_session=old).first())
    seed = await db_async(lambda: Entry.objects.get(session=new))()
    assert seed.custom_type == "handoff" and "Go on." in seed.text
    refreshed = await wait_until(lambda: not ChatSession.objects.get(pk=new.pk).generation_id)
    assert refreshed


async def test_only_one_generation_runs_per_session_across_processes(
    owner, fake_anthropic, pair, open_socket
):
    a, b = pair
    fake_anthropic.enqueue(Reply.held_tokens(2, 48), Reply.text("second"))
    session = await db_async(make_session)(owner, exchanges=1)
    tab_a = await open_socket(a, owner, session)
    tab_b = await open_socket(b, owner, session)
    await tab_a.send(message="first")
    await tab_a.until("token1 ")  # the first reply is held mid-stream
    await tab_b.send(message="/handoff")
    await tab_b.until("already running")
    await tab_b.send(message="then this")
    await tab_b.until("Queued")
    fake_anthropic.release()
    await tab_b.until("<p>second</p>")  # the persisted, rendered reply
    texts = await db_async(
        lambda: list(Entry.objects.filter(session=session).values_list("content", flat=True))
    )()
    assert len(texts) == 2 + 4  # the history, then two exchanges one after the other
    assert len(fake_anthropic.requests) == 2


async def test_a_killed_process_leaves_an_interrupted_session_that_works_again(
    owner, fake_anthropic, fake_server, redis, open_socket, client
):
    env = model_env(
        fake_server, redis, AGENTWEB_GENERATION_LEASE="1.5", AGENTWEB_PARTIAL_SAVE_SECONDS="0"
    )
    doomed = Daphne("daphne-doomed", **env)
    fake_anthropic.enqueue(Reply.held(["token0 ", "token1 ", "token2 "]), Reply.text("back again"))
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await open_socket(doomed, owner, session)
    await tab.send(message="long job")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.until("token2 ")
    await saved_partial(session.pk, "token0 token1 token2 ")  # saved as it streamed
    doomed.kill()
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    survivor = Daphne("daphne-survivor", **env)
    try:
        await db_async(client.force_login)(owner)
        async with asyncio.timeout(20):
            while (
                "interrupted"
                not in (
                    page := await db_async(client.get)(session.get_absolute_url())
                ).content.decode()
            ):
                await asyncio.sleep(0.1)
        assert "Generating…" not in page.content.decode()
        tab = await open_socket(survivor, owner, session)
        await tab.send(message="are you there?")
        await tab.until("back again")
    finally:
        survivor.stop()
        doomed.stop()
    kinds = await db_async(
        lambda: list(Entry.objects.filter(session=session).values_list("kind", "custom_type"))
    )()
    assert ("custom", "interrupted") in kinds
    kept = await db_async(
        lambda: Entry.objects.get(session=session, role="assistant", error="interrupted")
    )()
    assert (kept.text, kept.status) == ("token0 token1 token2 ", "aborted")  # saved as it came
