"""Queued messages (issue 56, rough edge 9): a message sent while a reply runs is shown above
the message box, in every tab, where it can be edited or removed until the reply ends and it
is sent."""

from __future__ import annotations

import asyncio

import pytest

from sessions import generation
from sessions.models import PendingPrompt

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_a_queued_message_is_shown_edited_and_sent_as_edited(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held(["Working"]), Reply.text("About the tests."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, other = await open_tab(owner, session)
    await tab.send(message="first")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(message="and then the docs")
    shown = await other.until("Queued: sent when the reply ends")  # every tab shows it
    assert '<span class="plain queue-text">and then the docs</span>' in shown
    [queued] = await db_async(lambda: list(PendingPrompt.objects.filter(session=session)))()
    await tab.send(action="queue_edit", entry=queued.pk, message="and then the tests")
    assert "and then the tests</span>" in await other.until("and then the tests</span>")
    fake_anthropic.release()
    await tab.until("About the tests.")
    await generation.wait_idle()
    asked = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][-1]["text"]
    assert asked == "and then the tests"
    assert '<section id="queue" class="queue" hx-swap-oob="true" hidden></section>' in (
        "".join(tab.received)
    )  # the queue is empty again


async def test_a_removed_message_is_never_sent(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held(["Working"]))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(message="never mind this")
    await tab.until("never mind this</span>")
    [queued] = await db_async(lambda: list(PendingPrompt.objects.filter(session=session)))()
    await tab.send(action="queue_remove", entry=queued.pk)
    await tab.until('<section id="queue" class="queue" hx-swap-oob="true" hidden></section>')
    fake_anthropic.release()
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 1
    assert not await db_async(PendingPrompt.objects.exists)()
    # Removing it again, or another session's, is refused in words.
    await tab.send(action="queue_remove", entry=queued.pk)
    said = await tab.until("no longer queued")
    assert "That message is no longer queued: it was sent or removed." in said
