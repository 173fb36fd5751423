"""AgentSession: the reference agent's events, aborts, and follow-ups, against the fake API."""

from __future__ import annotations

import asyncio

import pytest

from sessions.agent import AgentSession
from sessions.models import Entry, PendingPrompt

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_a_prompt_emits_the_reference_agents_events_in_order(owner, fake_anthropic):
    fake_anthropic.enqueue(Reply.text("one two three"))
    session = await db_async(make_session)(owner)
    events = []

    async def record(event):
        events.append((event.type, event.role, event.delta))

    agent = AgentSession(session, listener=record)
    reply = await agent.prompt("hello")
    assert [e[:2] for e in events] == [
        ("agent_start", ""),
        ("message_start", "user"),
        ("message_end", "user"),
        ("message_start", "assistant"),
        ("message_update", "assistant"),
        ("message_update", "assistant"),
        ("message_update", "assistant"),
        ("message_end", "assistant"),
        ("agent_end", ""),
    ]
    assert "".join(delta for _, _, delta in events) == reply.text == "one two three"
    assert agent.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "one two three"}],
    }


async def test_an_abort_before_the_reply_starts_streaming_still_stops_it(owner, fake_anthropic):
    session = await db_async(make_session)(owner, exchanges=1)
    agent = AgentSession(session)

    async def abort_at_start(event):
        if event.type == "agent_start":
            assert agent.abort()

    agent.listener = abort_at_start
    reply = await agent.prompt("never sent")
    assert reply is not None and reply.status == Entry.Status.ABORTED and reply.text == ""
    assert fake_anthropic.requests == []


async def test_a_prompt_while_streaming_is_queued_not_run(owner, fake_anthropic):
    fake_anthropic.enqueue(Reply.text("first answer"))
    session = await db_async(make_session)(owner)
    agent = AgentSession(session)

    async def prompt_again(event):
        if event.type == "message_update" and event.delta == "first":
            assert await agent.prompt("typed meanwhile") is None

    agent.listener = prompt_again
    await agent.prompt("first")
    queued = await db_async(lambda: list(PendingPrompt.objects.values_list("text", flat=True)))()
    assert queued == ["typed meanwhile"]
    assert len(fake_anthropic.requests) == 1


async def test_abort_with_nothing_running_does_nothing(owner):
    session = await db_async(make_session)(owner)
    assert AgentSession(session).abort() is False


async def test_prompt_templates_expand_unless_expansion_is_off(owner, fake_anthropic, open_tab):
    from sessions.models import PromptTemplate

    await db_async(PromptTemplate.objects.create)(
        owner=owner, name="review", body="Review this: $ARGUMENTS"
    )
    session = await db_async(make_session)(owner)
    agent = AgentSession(session)
    await agent.prompt("/review src/app.py")
    await agent.prompt("/review raw", expand_prompt_templates=False)
    sent = [r["json"]["messages"][-1]["content"][-1]["text"] for r in fake_anthropic.requests]
    assert sent == ["Review this: src/app.py", "/review raw"]
    # From the chat box, a template's name is not an unknown command.
    _, tab = await open_tab(owner, session)
    await tab.send(message="/review the tests")
    assert await asyncio.to_thread(
        fake_anthropic.wait_for, lambda: len(fake_anthropic.requests) == 3
    )
    assert (
        fake_anthropic.requests[-1]["json"]["messages"][-1]["content"][-1]["text"]
        == "Review this: the tests"
    )
