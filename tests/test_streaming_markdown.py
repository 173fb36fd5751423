"""A reply renders as markdown while it streams: each finished block is sent rendered, through
the same markdown-it + nh3 pipeline as finished messages, and the open block stays plain text
until it ends (issue 11, item 1)."""

from __future__ import annotations

import asyncio

import pytest

from sessions import generation
from sessions.blocks import Blocks
from sessions.models import Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .xss import PAYLOADS, dangerous


def finished_blocks(text: str, piece: int) -> list[str]:
    """The blocks `text` ends, streamed `piece` characters at a time."""
    blocks = Blocks()
    found = [blocks.add(text[i : i + piece]) for i in range(0, len(text), piece)]
    return [block for block in found if block]


def test_a_block_ends_at_a_blank_line_after_a_heading_and_at_a_closing_fence():
    text = "## Goal\nShip it.\n\n- one\n- two\n\n```python\nx = 1\n```\nand then"
    assert finished_blocks(text, 1) == [
        "## Goal\n",
        "Ship it.\n\n",
        "- one\n- two\n\n",
        "```python\nx = 1\n```\n",
    ]
    assert Blocks(text).tail == "and then"


def test_a_blank_line_inside_a_code_block_does_not_end_it():
    text = "~~~~\nfirst\n\n~~~\nstill code\n~~~~\nafter\n\n"
    assert finished_blocks(text, 3) == ["~~~~\nfirst\n\n~~~\nstill code\n~~~~\n", "after\n\n"]


def test_how_the_reply_is_cut_into_deltas_does_not_change_its_blocks():
    text = "# T\n\npara one\nstill one\n\n```\ncode\n\nmore\n```\n> quote\n\nend"
    expected = finished_blocks(text, len(text))
    for piece in (1, 2, 5, 17):
        assert "".join(finished_blocks(text, piece)) == "".join(expected)
    assert Blocks(text).finished + Blocks(text).tail == text


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_headings_and_lists_arrive_rendered_before_the_reply_ends(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(
        Reply.held(["## Goal\n", "Ship *it*.\n\n", "- one\n", "- two\n\n", "still open"])
    )
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="plan please")
    await tab.until("still open")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    sent = "".join(tab.received)
    assert "<h2>Goal</h2>" in sent
    assert "<p>Ship <em>it</em>.</p>" in sent
    assert "<li>one</li>" in sent and "<li>two</li>" in sent
    assert 'id="live-blocks" hx-swap-oob="beforeend"' in sent
    assert "entry--assistant status--complete" not in sent  # all of it while streaming
    fake_anthropic.release()
    await tab.until("entry--assistant status--complete")
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tab_that_joins_mid_reply_gets_the_finished_blocks_rendered(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held(["# Title\n\n", "Some **bold** words\n\n", "open tail"]))
    session = await db_async(make_session)(owner)
    _, first = await open_tab(owner, session)
    await first.send(message="go")
    await first.until("open tail")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    user = await db_async(lambda: Entry.objects.filter(session=session).last())()
    _, second = await open_tab(owner, session, after=user.pk)
    snapshot = await second.until("open tail")
    assert '<div id="live-blocks" class="markdown"><h1>Title</h1>' in snapshot
    assert "<strong>bold</strong>" in snapshot
    assert '<div id="live-text" class="plain">open tail</div>' in snapshot
    fake_anthropic.release()
    await second.until("entry--assistant status--complete")
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_no_payload_of_the_xss_corpus_streams_out_as_markup(owner, fake_anthropic, open_tab):
    chunks = [f"{payload}\n\n" for payload in PAYLOADS] + ["`unclosed <script>"]
    fake_anthropic.enqueue(Reply(chunks=chunks))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="x")
    await tab.until("entry--assistant status--complete")
    await generation.wait_idle()
    streamed = [frame for frame in tab.received if "live-blocks" in frame or "live-text" in frame]
    assert any('id="live-blocks" hx-swap-oob="beforeend"' in frame for frame in streamed)
    assert [found for frame in streamed for found in dangerous(frame)] == []
