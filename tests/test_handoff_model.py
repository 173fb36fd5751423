"""`/handoff --model <id> [focus]` (issue 55, item 3): the document is written as always, and
the new session runs on the model named; an unknown model is refused with those offered."""

from __future__ import annotations

import re

import pytest

from sessions import generation
from sessions.models import ChatSession, Preferences

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, redirected_session

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_the_new_session_runs_on_the_model_named_and_the_focus_still_counts(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT), Reply.text("On Haiku now."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff --model claude-haiku-4-5 the database work")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    asked = fake_anthropic.requests[0]["json"]
    assert asked["model"] == FAKE_MODEL  # the document is written by the session's own model
    assert asked["messages"][-1]["content"][-1]["text"].endswith(
        "Additional focus: the database work"
    )
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert (new.model, (await db_async(ChatSession.objects.get)(pk=old.pk)).model) == (
        "claude-haiku-4-5",
        FAKE_MODEL,
    )
    _, new_tab = await open_tab(owner, new)
    await new_tab.send(message="go on")
    await new_tab.until("On Haiku now.")
    assert fake_anthropic.requests[1]["json"]["model"] == "claude-haiku-4-5"


async def test_an_unknown_model_is_refused_with_those_offered_and_nothing_starts(
    owner, fake_anthropic, open_tab
):
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff --model gpt-5 the tests")
    refused = await tab.until("Unknown model")
    assert "Unknown model “gpt-5”: choose one of local, " in refused
    assert "claude-haiku-4-5" in refused
    await tab.send(message="/handoff --model")
    assert "Name the model after --model: /handoff --model &lt;id&gt; [focus]." in (
        await tab.until("Name the model")
    )
    assert fake_anthropic.requests == []
    assert await db_async(ChatSession.objects.count)() == 1


async def test_a_reviewed_document_switches_to_the_model_named(owner, fake_anthropic, open_tab):
    await db_async(Preferences.objects.create)(user=owner, review_handoff=True)
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff --model local")
    html = await tab.until("Review the handoff document")
    await generation.wait_idle()
    found = re.search(
        r'value="handoff_confirm">\s*<input type="hidden" name="entry" value="(\d+)"', html
    )
    assert found is not None
    await tab.send(action="handoff_confirm", entry=found.group(1), document=DOCUMENT)
    new_id = redirected_session(await tab.until("data-url="))
    assert (await db_async(ChatSession.objects.get)(pk=new_id)).model == "local"
