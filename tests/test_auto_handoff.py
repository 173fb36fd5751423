"""Hand off automatically at N % of the window: before the prompt that would pass it."""

from __future__ import annotations

import asyncio
import re

import pytest

from sessions import generation, handoff, store
from sessions.models import ChatSession, Entry, PendingPrompt, Preferences

from .conftest import FAKE_MODEL, SIX_SECTIONS, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

DOCUMENT = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)


@pytest.fixture
def small_window(settings, fake_anthropic):
    """The fake model's window is 10,000 tokens; the owner hands off automatically at 50 %."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 10_000, "max_output": 1_000},
    }
    return fake_anthropic


def session_at(owner, tokens: int) -> ChatSession:
    session = make_session(owner, exchanges=2)
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=tokens)
    session.refresh_from_db()
    return session


async def prefer(owner, percent: int | None) -> None:
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=percent)


async def test_a_prompt_that_would_pass_the_threshold_hands_off_first_and_goes_to_the_new_session(
    owner, small_window, open_tab
):
    await prefer(owner, 50)
    small_window.enqueue(Reply.text(DOCUMENT), Reply.text("Answered in the new session."))
    old = await db_async(session_at)(owner, 4_995)
    _, tab = await open_tab(owner, old)
    await tab.send(message="and now the tests, please")  # 4,995 + 9 tokens: past 5,000
    html = await tab.until("data-url=")
    assert "handing off first" in html and "New session started with handoff context" in html
    await generation.wait_idle()
    handoff_request, prompt_request = (r["json"]["messages"] for r in small_window.requests)
    assert handoff_request[-1]["content"][-1]["text"] == handoff.build_prompt()
    assert prompt_request == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": handoff.wrap(DOCUMENT, came_from=old)},
                {"type": "text", "text": "and now the tests, please"},
            ],
        }
    ]
    new = await db_async(ChatSession.objects.get)(parent_session=old)
    texts = [e.text for e in await db_async(store.get_branch)(new)]
    assert texts[1:] == ["and now the tests, please", "Answered in the new session."]
    old_texts = [e.text for e in await db_async(store.get_branch)(old)]
    assert "and now the tests, please" not in old_texts


async def test_below_the_threshold_the_prompt_is_sent_as_usual(owner, small_window, open_tab):
    await prefer(owner, 50)
    small_window.enqueue(Reply.text("Plain answer."))
    old = await db_async(session_at)(owner, 4_000)
    _, tab = await open_tab(owner, old)
    await tab.send(message="a short question")
    await tab.until("Plain answer.")
    await generation.wait_idle()
    assert len(small_window.requests) == 1
    assert await db_async(ChatSession.objects.count)() == 1


async def test_without_the_preference_nothing_hands_off(owner, small_window, open_tab):
    await prefer(owner, None)
    small_window.enqueue(Reply.text("Plain answer."))
    old = await db_async(session_at)(owner, 9_000)
    _, tab = await open_tab(owner, old)
    await tab.send(message="a short question")
    await tab.until("Plain answer.")
    await generation.wait_idle()
    assert await db_async(ChatSession.objects.count)() == 1


async def test_cancel_stops_the_automatic_handoff_and_the_prompt_is_sent_here(
    owner, small_window, open_tab
):
    await prefer(owner, 50)
    small_window.enqueue(Reply.held_tokens(3, 297), Reply.text("Answered here."))
    old = await db_async(session_at)(owner, 6_000)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("token2 ")  # the handoff's document is held there
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    await tab.until("Answered here.")
    assert await asyncio.to_thread(small_window.wait_for_disconnect, 5)
    await generation.wait_idle()
    assert await db_async(ChatSession.objects.count)() == 1
    last = (await db_async(store.get_branch)(old))[-2:]
    assert [e.text for e in last] == ["go on", "Answered here."]
    assert await db_async(PendingPrompt.objects.count)() == 0


async def test_with_review_on_the_prompt_waits_for_the_reviewed_switch(
    owner, small_window, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50, review_handoff=True)
    small_window.enqueue(Reply.text(DOCUMENT), Reply.text("Answered after the review."))
    old = await db_async(session_at)(owner, 6_000)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    html = await tab.until("Review the handoff document")
    await generation.wait_idle()
    assert await db_async(PendingPrompt.objects.filter(session=old).count)() == 1
    reply_id = int(
        re.search(
            r'value="handoff_confirm">\s*<input type="hidden" name="entry" value="(\d+)"', html
        ).group(1)
    )
    await tab.send(action="handoff_confirm", entry=reply_id, document=DOCUMENT)
    await tab.until("data-url=")
    await generation.wait_idle()
    new = await db_async(ChatSession.objects.get)(parent_session=old)
    texts = [e.text for e in await db_async(store.get_branch)(new)]
    assert texts[1:] == ["go on", "Answered after the review."]
    kinds = await db_async(lambda: list(Entry.objects.filter(session=old).values_list("kind", flat=True)))()  # fmt: skip
    assert kinds.count("message") == 6  # two exchanges, the handoff prompt and its document
