"""A page opened mid-generation catches up exactly, keeps streaming, and can cancel (SPEC B7)."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from sessions import generation
from sessions.models import Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

SNAPSHOT_TEXT = re.compile(r'<div id="live-text" class="plain">(.*?)</div>', re.DOTALL)
DELTA = re.compile(r'<div id="live-text" hx-swap-oob="beforeend">(.*?)</div>', re.DOTALL)


def live_text(frames: list[str]) -> str:
    """The streaming text as a browser would show it after these frames, in order."""
    text = ""
    for frame in frames:
        for match in SNAPSHOT_TEXT.finditer(frame):
            text = html_lib.unescape(match.group(1))
        for match in DELTA.finditer(frame):
            text += html_lib.unescape(match.group(1))
    return text


async def test_a_tab_opened_mid_stream_shows_the_text_so_far_without_gap_or_duplicate(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held_tokens(11, 49))
    session = await db_async(make_session)(owner)
    _, first = await open_tab(owner, session)
    await first.send(message="stream please")
    await first.until("token10 ")  # the stream is held there
    # The second page was rendered after the user message was saved.
    user_entry = await db_async(lambda: Entry.objects.filter(session=session).first())()
    _, second = await open_tab(owner, session, after=user_entry.pk)
    frames = [await second.until("token10 ")]  # the snapshot: the text so far
    fake_anthropic.release()
    frames.append(await second.until("token59 "))  # it keeps streaming to the end
    final = await second.until("entry--assistant status--complete")
    await generation.wait_idle()
    reply = await db_async(lambda: Entry.objects.filter(session=session).last())()
    assert live_text(frames) == reply.text  # exactly: no gap, no duplicate
    assert "token10 " in frames[0].split('hx-swap-oob="beforeend"')[0]  # came in the snapshot
    assert final.count(f'id="entry-{reply.pk}"') == 1
    assert f'id="entry-{user_entry.pk}"' not in "".join(second.received)  # already on the page


async def test_two_tabs_both_stream_and_either_can_cancel(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held_tokens(4, 396))
    session = await db_async(make_session)(owner)
    _, first = await open_tab(owner, session)
    _, second = await open_tab(owner, session)
    await first.send(message="go")
    await first.until("token3 ")
    await second.until("token3 ")
    await second.send(action="cancel")
    await first.until("Cancelled")
    await second.until("Cancelled")
    await generation.wait_idle()
    reply = await db_async(lambda: Entry.objects.filter(session=session).last())()
    assert reply.status == Entry.Status.ABORTED
    # Cancelling never cuts a delta short: both tabs saw exactly the text that was kept.
    assert live_text(first.received) == live_text(second.received) == reply.text


async def test_a_tab_that_closes_does_not_stop_the_generation(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held_tokens(2, 28))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="go")
    await tab.until("token1 ")  # the stream is held there
    await tab.close()
    fake_anthropic.release()  # the rest streams to no tab
    await generation.wait_idle()
    reply = await db_async(lambda: Entry.objects.filter(session=session).last())()
    assert reply.status == Entry.Status.COMPLETE and reply.text.endswith("token29 ")
