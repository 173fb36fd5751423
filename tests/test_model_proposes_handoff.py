"""The model may ask for a handoff (issue 55, item 2): a `handoff` call asks the user with the
card of a tool that changes things; allowed, `/handoff` runs with its focus once the reply's
round ends; denied, the model reads that it was. Offered unless the user turns it off."""

from __future__ import annotations

import re

import pytest

from sessions import generation
from sessions.models import ChatSession, Preferences

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, redirected_session

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

ASKED = "Hand off to a new session?"
PROPOSAL = {"focus": "the failing parser tests", "reason": "the context is long"}


def question_in(html: str) -> str:
    found = re.findall(r'"action": "answer", "question": (\d+)', html)
    assert found, "no question card in the frames"
    return found[-1]


async def test_allowed_the_handoff_runs_with_its_focus_once_the_reply_ends(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(
        Reply.tool("handoff", PROPOSAL, text="This is getting long."),
        Reply.text("Handing off now."),
        Reply.text(DOCUMENT),
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="Why do the parser tests still fail?")
    html = await tab.until(ASKED)
    assert "The model proposes to write a handoff document and go on in a new session" in html
    assert "&quot;focus&quot;: &quot;the failing parser tests&quot;" in html
    assert ">Allow once</button>" in html and ">Deny</button>" in html
    assert "Allow for this session" not in html  # a handoff is asked about each time
    await tab.send(action="answer", question=question_in(html), answer="once")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    result = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][0]
    assert result["content"].startswith("The user allowed the handoff: when this reply ends")
    assert "“the failing parser tests”" in result["content"]
    asked = fake_anthropic.requests[2]["json"]["messages"][-1]["content"][-1]["text"]
    assert "Additional focus: the failing parser tests" in asked  # after the reply's round
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert new.parent_session_id == old.pk


async def test_denied_nothing_is_handed_off_and_the_model_reads_it(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.tool("handoff", PROPOSAL), Reply.text("Understood, going on."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="Keep going.")
    html = await tab.until(ASKED)
    await tab.send(action="answer", question=question_in(html), answer="deny")
    await tab.until("Understood, going on.")
    await generation.wait_idle()
    result = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][0]
    assert (result["content"], result.get("is_error")) == (
        "The user denied this call: it was not run.",
        True,
    )
    assert len(fake_anthropic.requests) == 2
    assert await db_async(ChatSession.objects.count)() == 1


async def test_a_reloaded_page_shows_the_proposal_and_answers_it(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(
        Reply.tool("handoff", PROPOSAL), Reply.text("Handing off."), Reply.text(DOCUMENT)
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="Start over?")
    await tab.until(ASKED)
    await tab.close()
    _, reloaded = await open_tab(owner, old)  # a new socket catches up with the question
    html = await reloaded.until(ASKED)
    await reloaded.send(action="answer", question=question_in(html), answer="once")
    redirected_session(await reloaded.until("data-url="))


async def test_a_reloaded_page_denies_the_proposal_and_the_model_reads_it(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.tool("handoff", PROPOSAL), Reply.text("Staying here, then."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="Start over?")
    await tab.until(ASKED)
    await tab.close()
    _, reloaded = await open_tab(owner, old)
    html = await reloaded.until(ASKED)
    await reloaded.send(action="answer", question=question_in(html), answer="deny")
    await reloaded.until("Staying here, then.")
    await generation.wait_idle()
    result = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][0]
    assert result["content"] == "The user denied this call: it was not run."
    assert await db_async(ChatSession.objects.count)() == 1


async def test_with_the_preference_off_the_tool_is_not_offered(owner, fake_anthropic, open_tab):
    await db_async(Preferences.objects.create)(user=owner, propose_handoff=False)
    fake_anthropic.enqueue(Reply.text("Plain."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Hello")
    await tab.until("Plain.")
    tools = [tool["name"] for tool in fake_anthropic.requests[0]["json"]["tools"]]
    assert tools == ["todo_write"]


async def test_offline_the_model_proposes_a_handoff_when_asked_in_words(owner, open_tab, settings):
    settings.ANTHROPIC_API_KEY = ""
    old = await db_async(make_session)(owner, model="local", exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="This is a mess: let's hand off and focus on the parser.")
    html = await tab.until(ASKED)
    assert "&quot;focus&quot;: &quot;the parser&quot;" in html
    await tab.send(action="answer", question=question_in(html), answer="once")
    new_id = redirected_session(await tab.until("data-url=", timeout=30))
    await generation.wait_idle()
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert new.parent_session_id == old.pk
