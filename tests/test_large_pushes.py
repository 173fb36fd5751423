"""A push larger than daphne lets a WebSocket message be (1 MB) reaches the tab in parts, or,
for one entry too large to go whole, as a notice that says to reload: the tab stays open."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from sessions.models import ChatSession, Entry
from sessions.pushes import packed

from .conftest import _cookie_for, claude_env, db_async, make_session
from .fake_anthropic import FakeAnthropic, Reply
from .servers import Daphne, read_until_idle


@pytest.fixture(scope="module")
def server(django_db_setup: Any, fake_server: FakeAnthropic) -> Iterator[Daphne]:
    daphne = Daphne("daphne-large-pushes", **claude_env(fake_server.url))
    yield daphne
    daphne.stop()


def long_messages(owner: Any, count: int, chars: int) -> ChatSession:
    """A session of `count` messages of `chars` characters, user's and model's in turn, each
    starting with its number."""
    session = make_session(owner)
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        text = f"m{n:03d} " + "w " * (chars // 2)
        session.append_message(role, [{"type": "text", "text": text}])
    return session


async def opened(server: Daphne, owner: Any, session: ChatSession, after: int) -> Any:
    cookie = await _cookie_for(owner)
    return connect(
        server.ws_url(f"/ws/sessions/{session.pk}/?after={after}"),
        additional_headers={"Cookie": f"sessionid={cookie}"},
        origin=server.url,  # type: ignore[arg-type]
        max_size=None,
    )


async def caught_up(tab: Any, received: list[str]) -> None:
    """Read the tab's catch-up, to its status line; then a Cancel is answered: the tab is open."""
    await until(tab, 'id="status"', received)
    await tab.send(json.dumps({"action": "cancel"}))
    assert "Nothing is running." in await until(tab, "Nothing is running.", received)


async def until(tab: Any, text: str, received: list[str]) -> str:
    async with asyncio.timeout(30):
        while text not in "".join(received[-1:]):
            received.append(str(await tab.recv()))
    return received[-1]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_catch_up_of_megabytes_reaches_the_tab_whole_and_in_order(server, owner):
    """Sixty messages of 60 KB that a tab has not seen (it slept while they came): 3.6 MB."""
    session = await db_async(long_messages)(owner, 60, 60_000)
    received: list[str] = []
    async with await opened(server, owner, session, after=0) as tab:
        await caught_up(tab, received)
    seen = "".join(received)
    found = [seen.find(f"m{n:03d} ") for n in range(60)]
    assert -1 not in found
    assert found == sorted(found)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_entry_too_large_for_any_message_says_to_reload_and_the_others_arrive(
    server, owner
):
    """An imported reply of 1.5 MB, between two short messages the tab has not seen."""
    session = await db_async(long_messages)(owner, 3, 2_000)
    await db_async(session.append_message)(
        "assistant", [{"type": "text", "text": "huge " + "w " * 750_000}]
    )
    await db_async(session.append_message)("user", [{"type": "text", "text": "m003 after it"}])
    received: list[str] = []
    async with await opened(server, owner, session, after=0) as tab:
        await caught_up(tab, received)
    seen = "".join(received)
    notice = "An update too large to show here as it happens: reload the page to see it."
    assert seen.index("m002 ") < seen.index(notice) < seen.index("m003 after it")
    assert "huge " not in seen


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_transcript_too_large_to_push_whole_shows_its_latest_entries_and_the_tab_goes_on(
    server, owner, fake_anthropic
):
    """An edit moves the session to a new branch, whose transcript every tab is sent: here
    about 3.5 MB, more than daphne sends in a message."""
    fake_anthropic.window = 2_000_000  # the branch's context, 3.5 MB, is the model's to read
    fake_anthropic.enqueue(Reply.text("Answered on the new branch."))
    session = await db_async(long_messages)(owner, 60, 60_000)
    last_question = await db_async(
        lambda: Entry.objects.filter(session=session, role="user").latest("id").pk
    )()
    received: list[str] = []
    async with await opened(server, owner, session, after=session.leaf_id) as tab:
        await until(tab, 'id="status"', received)
        edit = {"action": "edit", "entry": last_question, "message": "a shorter question"}
        await tab.send(json.dumps(edit))
        shown = await until(tab, 'id="transcript"', received)
        assert "m057 " in shown
        assert "m000 " not in shown
        assert re.search(r"Show \d+ earlier entries", shown)
        assert "Answered on the new branch." in await until(
            tab, "Answered on the new branch.", received
        )
        await read_until_idle(tab, received)
    assert "a shorter question" in "".join(received)
    assert "reload the page" not in "".join(received)


def test_parts_are_packed_in_order_into_messages_of_at_most_the_limit_in_bytes():
    parts = ["a" * 400, "é" * 300, "b" * 100, "€" * 100, "c"]  # 400, 600, 100, 300, 1 bytes
    messages = list(packed(parts, too_large, limit=1000))
    assert messages == ["a" * 400 + "é" * 300, "b" * 100 + "€" * 100 + "c"]


def test_a_part_over_the_limit_goes_as_the_notice_between_the_others():
    messages = list(packed(["before", "x" * 2000, "after"], too_large, limit=1000))
    assert messages == ["before(too large)after"]


def too_large() -> str:
    return "(too large)"
