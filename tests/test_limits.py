"""Caps that keep one user, or one flooding socket, from running up the operator's key or
holding up everyone else. Each refusal says why and gives the text back."""

from __future__ import annotations

import asyncio
import html
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions import generation, store
from sessions.generation import caps, turns
from sessions.generation.claims import claim_free
from sessions.generation.job import Job
from sessions.models import ChatSession, Entry, PendingPrompt
from sessions.partials.events import render

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def generating(owner, fake, open_tab, session=None):
    """A session whose reply is held mid-stream by the fake model; its tab."""
    fake.enqueue(Reply.held(["Working "]))
    session = session or await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="start")
    assert await asyncio.to_thread(fake.wait_for_hold)
    return session, tab


async def test_a_session_queues_only_so_many_prompts(owner, fake_anthropic, open_tab, settings):
    settings.AGENTWEB_MAX_QUEUED_PROMPTS = 2
    session, tab = await generating(owner, fake_anthropic, open_tab)
    for text in ("one", "two"):
        await tab.send(message=text)
        await tab.until("Queued")
    await tab.send(message="three")
    html = await tab.until("already waiting")
    assert "2 messages are already waiting in this session (the limit is 2)" in html
    assert "three</textarea>" in html  # given back
    assert await db_async(PendingPrompt.objects.count)() == 2
    fake_anthropic.release()


async def test_a_user_runs_only_so_many_generations_at_once(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_MAX_GENERATIONS_PER_USER = 1
    await generating(owner, fake_anthropic, open_tab)
    other = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, other)
    await tab.send(message="meanwhile, here")
    html = await tab.until("the limit is 1")
    assert "1 replies are being generated in your other sessions (the limit is 1)" in html
    assert "meanwhile, here</textarea>" in html
    await tab.send(message="/handoff")
    assert "the limit is 1" in await tab.until("the limit is 1")
    assert len(fake_anthropic.requests) == 1
    fake_anthropic.release()


async def test_the_cap_counts_the_owners_live_claims_only(owner, other_user, settings):
    settings.AGENTWEB_MAX_GENERATIONS_PER_USER = 2
    now = timezone.now()
    live, lapsed = now + timedelta(minutes=5), now - timedelta(seconds=1)

    def refusals() -> list[str]:
        for who, generation_id, lease in [
            (owner, "a", live),
            (owner, "b", lapsed),  # its process died: not running
            (owner, "", None),  # idle
            (other_user, "c", live),
            (other_user, "d", live),
        ]:
            ChatSession.objects.create(
                owner=who, model="local", generation_id=generation_id, generation_lease_until=lease
            )
        asking = ChatSession.objects.create(owner=owner, model="local")
        one_running = caps.over_a_cap(asking, queueing=True)
        ChatSession.objects.filter(generation_id="b").update(generation_lease_until=live)
        return [one_running, caps.over_a_cap(asking, queueing=True)]

    assert await db_async(refusals)() == [
        "",
        "2 replies are being generated in your other sessions (the limit is 2): "
        "send this when one of them ends.",
    ]


async def test_a_free_session_is_claimed_in_one_statement_only_under_the_owners_cap(
    owner, other_user, settings
):
    settings.AGENTWEB_MAX_GENERATIONS_PER_USER = 2
    now = timezone.now()
    live, lapsed = now + timedelta(minutes=5), now - timedelta(seconds=1)

    def claims() -> list[str | None]:
        for who, generation_id, lease in [
            (owner, "a", live),
            (owner, "b", lapsed),  # its process died: not running
            (other_user, "c", live),
            (other_user, "d", live),
        ]:
            ChatSession.objects.create(
                owner=who, model="local", generation_id=generation_id, generation_lease_until=lease
            )
        first, second = (ChatSession.objects.create(owner=owner, model="local") for _ in "ab")
        taken = [
            claim_free(turns.CLAIMED_IF_FREE, session.pk, generation_id, "prompt", "tab")
            for session, generation_id in [(first, "e"), (second, "f"), (first, "g")]
        ]
        stored = ChatSession.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")
        return [
            *(getattr(session, "generation_id", None) for session in taken),
            *stored.values_list("generation_id", flat=True),
        ]

    # the first takes the owner's second slot; the second finds the owner at the cap; the
    # first's own session is busy now
    assert await db_async(claims)() == ["e", None, None, "e", ""]


async def test_a_flooding_socket_is_slowed_and_cancel_still_goes_through(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_FRAMES_PER_SECOND = 0.01
    settings.AGENTWEB_FRAME_BURST = 3
    settings.AGENTWEB_MAX_QUEUED_PROMPTS = 100
    session, tab = await generating(owner, fake_anthropic, open_tab)  # "start" is frame 1
    for n in range(5):
        await tab.send(message=f"flood {n}")
    html = await tab.until("Too many messages at once")
    assert "Too many messages at once: wait a moment, then send again." in html
    assert await db_async(PendingPrompt.objects.count)() == 2  # frames 2 and 3
    await tab.send(action="cancel")
    await tab.until("Cancelled")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)


async def test_a_frame_over_the_byte_limit_is_refused(owner, open_tab, settings):
    settings.AGENTWEB_MAX_FRAME_BYTES = 1_000
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.ws.send_to(text_data=json.dumps({"message": "😀" * 300}))  # 1,200 bytes of UTF-8
    assert "Message too long" in await tab.until("Message too long")


async def test_a_tab_far_behind_catches_up_on_the_latest_entries_in_pages(owner, open_tab):
    session = await db_async(make_session)(owner, model="local", exchanges=130)  # 260 entries
    _, tab = await open_tab(owner, session, after=0)
    frames = [await tab.receive() for _ in range(6)]
    assert "60 earlier new entries are not shown here: reload the page to see them." in frames[0]
    pages = frames[1:5]
    assert [page.count('<article id="entry-') for page in pages] == [50, 50, 50, 50]
    assert "question 30<" in pages[0] and "answer 129<" in pages[-1]
    assert 'id="status"' in frames[5]


async def test_a_long_run_keeps_only_its_latest_entries_for_snapshots(owner):
    session = await db_async(make_session)(owner, model="local", exchanges=60)
    relay = Job(session, "gen", "channel", render).relay
    for entry in await db_async(store.get_branch)(session):
        relay.appended.append((entry.pk, "<article></article>"))
    snapshot = relay.snapshot(replying=False, purpose="", stage="")
    assert len(snapshot["entries"]) == 50
    assert snapshot["entries"][-1][0] == entry.pk
    await generation.wait_idle()


def given_back(frames: list[str]) -> str:
    """The message box's text as the pushes `frames` leave it: the first replaces it, the
    others are appended to it."""
    text = ""
    for frame in frames:
        for swap, piece in re.findall(
            r'<textarea id="message"[^>]*?(hx-swap-oob="[a-z]+")[^>]*>(.*?)</textarea>', frame, re.S
        ):
            text = (text if "beforeend" in swap else "") + html.unescape(piece)
    return text


async def test_a_frame_just_under_daphnes_limit_is_refused_in_words_and_given_back_whole(
    owner, open_tab
):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    typed = '<"quoted"> & ' * 69_000  # 897,000 characters: HTML-escaped, 2.8 MB
    frame = json.dumps({"message": typed})
    assert 1_000_000 < len(frame.encode()) <= 1_048_576  # daphne takes it; agentweb must refuse
    await tab.ws.send_to(text_data=frame)
    frames = [await tab.until("Message too long")]
    while given_back(frames) != typed:
        frames.append(await tab.receive())
    assert "Message too long: the limit is 100,000 characters." in frames[0]
    assert all(len(f.encode()) <= 1_000_000 for f in frames)  # each one daphne will send
    assert len(frames) > 3
    assert not await db_async(Entry.objects.filter(session=session).exists)()


async def test_the_longest_message_is_taken_however_json_escapes_it(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    typed = "\x01" * 99_999 + "?"  # 100,000 characters, six bytes each as JSON writes them
    await tab.ws.send_to(text_data=json.dumps({"message": typed}))
    async with asyncio.timeout(10):
        while not await db_async(Entry.objects.filter(session=session, role="user").exists)():
            await asyncio.sleep(0.05)
    stored = await db_async(Entry.objects.get)(session=session, role="user")
    assert stored.content[0]["text"] == typed
