"""Notices end when what they announce ends (issue 20, item 4): the line under the transcript
says "Queued", "Handoff cancelled" or "Nothing is running" only until the next reply starts."""

from __future__ import annotations

import pytest

from sessions import generation

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

ENDED = (
    '<div id="notices" class="notices" role="status" aria-live="polite" hx-swap-oob="true"></div>'
)


def notices_after(frames: list[str], said: str) -> list[str]:
    """The notice frames the tab got after the one that said `said`: '' for an ended one."""
    shown = [frame for frame in frames if 'id="notices"' in frame]
    at = next(i for i, frame in enumerate(shown) if said in frame)
    return ["" if ENDED in frame else frame for frame in shown[at + 1 :]]


async def test_the_queued_notice_ends_when_the_queued_prompt_is_sent(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held_tokens(2, 28), Reply.text("second answer"))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    await tab.until("token1 ")
    await tab.send(message="second")
    await tab.until("Queued: it will be sent when the current reply ends.")
    fake_anthropic.release()
    await tab.until("second answer")
    await generation.wait_idle()
    assert notices_after(tab.received, "Queued: it will be sent") == [""]


async def test_handoff_cancelled_ends_when_the_next_reply_starts(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held_tokens(2, 28), Reply.text("Back to work."))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("token1 ")
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    await generation.wait_idle()
    assert notices_after(tab.received, "Handoff cancelled") == []  # it stays while it is true
    await tab.send(message="go on")
    await tab.until("Back to work.")
    await generation.wait_idle()
    assert notices_after(tab.received, "Handoff cancelled") == [""]


async def test_nothing_is_running_ends_when_a_reply_starts(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Fine now."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(action="cancel")
    await tab.until("Nothing is running.")
    await tab.send(message="hello")
    await tab.until("Fine now.")
    await generation.wait_idle()
    assert notices_after(tab.received, "Nothing is running.") == [""]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("/nosuch", "Unknown command /nosuch. Type / to see the commands."),
        ("/help", "Slash commands"),
        ("/thinking", "Thinking level: off. Set it with /thinking off, low, medium or high."),
        ("/model", "Model: "),
        ("/export pdf", "Export as md or jsonl, not “pdf”."),
        ("/handoff", "Nothing to hand off (no messages yet)"),
    ],
)
async def test_every_other_notice_ends_when_the_next_reply_starts(
    owner, fake_anthropic, open_tab, typed, said
):
    fake_anthropic.enqueue(Reply.text("Answered."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message=typed)
    await tab.until(said)
    await generation.wait_idle()
    await tab.send(message="a question")
    await tab.until("Answered.")
    await generation.wait_idle()
    assert notices_after(tab.received, said) == [""]
