"""Mentions (issue 19, item 4): `@#42` names another of the user's sessions; the prompt carries a
one-line pointer to it (not its transcript), recall can look things up in it, and the page
shows it by its title. Another user's session cannot be mentioned."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions import generation
from sessions.agent.recall_tool import look_up
from sessions.models import ChatSession, Entry, PromptTemplate

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


def gateway(owner) -> ChatSession:
    other = make_session(owner, exchanges=1)
    other.rename("Gateway rewrite")
    other.append_message("user", [{"type": "text", "text": "The zanzibar port is 7443."}])
    return other


async def test_a_mention_carries_a_pointer_not_a_transcript_and_makes_recall_reach_it(
    owner, fake_anthropic, open_tab
):
    other = await db_async(gateway)(owner)
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Noted."))
    _, tab = await open_tab(owner, session)
    await tab.send(message=f"Go on from @#{other.pk} please")
    await tab.until("Noted.")
    await generation.wait_idle()
    request = fake_anthropic.requests[0]["json"]
    assert request["messages"][-1]["content"] == [
        {"type": "text", "text": f"Go on from @#{other.pk} please"},
        {
            "type": "text",
            "text": f"(Mentioned: session {other.pk} “Gateway rewrite”; the recall tool can look "
            "things up in it.)",
        },
    ]
    assert "zanzibar" not in str(request["messages"])
    assert [tool["name"] for tool in request["tools"]] == ["todo_write", "recall", "handoff"]
    found = await db_async(look_up)({"query": "zanzibar port", "session": other.pk}, session)
    assert f"[session {other.pk}, entry " in found.text and "7443" in found.text

    def page() -> str:
        client = Client()
        client.force_login(owner)
        return client.get(session.get_absolute_url()).content.decode()

    shown = await db_async(page)()
    assert (
        f'Go on from <a class="mention" href="/sessions/{other.pk}/">@Gateway rewrite</a> please'
        in shown
    )


async def test_another_users_session_cannot_be_mentioned(owner, other_user, open_tab):
    theirs = await db_async(gateway)(other_user)
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message=f"Look at @#{theirs.pk}")
    said = await tab.until("You can mention only your own sessions")
    assert f"#{theirs.pk} is not one of them." in said
    assert f"Look at @#{theirs.pk}" in said  # the text goes back in the box
    assert not await db_async(Entry.objects.filter(session=session).exists)()


async def test_another_users_session_cannot_be_mentioned_from_a_prompt_template(
    owner, other_user, open_tab
):
    theirs = await db_async(gateway)(other_user)
    await db_async(PromptTemplate.objects.create)(
        owner=owner, name="peek", body=f"Summarise @#{theirs.pk} for $1"
    )
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/peek me")
    said = await tab.until("You can mention only your own sessions")
    assert f"#{theirs.pk} is not one of them." in said
    assert "/peek me</textarea>" in said  # given back
    assert not await db_async(Entry.objects.filter(session=session).exists)()


async def test_another_users_session_cannot_be_mentioned_in_an_edited_message(
    owner, other_user, open_tab
):
    theirs = await db_async(gateway)(other_user)
    session = await db_async(make_session)(owner, model="local", exchanges=1)
    question = await db_async(Entry.objects.get)(session=session, role="user")
    _, tab = await open_tab(owner, session)
    await tab.send(action="edit", entry=question.pk, message=f"Now about @#{theirs.pk}")
    said = await tab.until("You can mention only your own sessions")
    assert f"#{theirs.pk} is not one of them." in said
    assert await db_async(Entry.objects.filter(session=session).count)() == 2  # nothing added
