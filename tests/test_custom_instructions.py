"""Custom instructions (issue 56, item 2, the user's own): Preferences → *Custom instructions*
are the system prompt of every request to the model, a handoff's included, and shown folded at
the top of each session."""

from __future__ import annotations

import pytest

from sessions import generation
from sessions.models import ChatSession, Preferences

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, redirected_session

INSTRUCTIONS = "Answer in British English. Keep replies under 200 words."


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_every_request_carries_them_as_its_system_prompt(owner, fake_anthropic, open_tab):
    await db_async(Preferences.objects.create)(user=owner, instructions=INSTRUCTIONS)
    fake_anthropic.enqueue(Reply.text("Colour noted."), Reply.text(DOCUMENT))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="What colour is it?")
    await tab.until("Colour noted.</p>")
    await generation.wait_idle()  # the reply has given its claim up: /handoff is taken
    await tab.send(message="/handoff")
    redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    reply, document = (request["json"] for request in fake_anthropic.requests)
    assert reply["system"] == INSTRUCTIONS
    assert document["system"] == INSTRUCTIONS  # the document is written under them too


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_without_instructions_no_system_prompt_is_sent(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Plain."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="hello")
    await tab.until("Plain.</p>")
    await generation.wait_idle()
    assert "system" not in fake_anthropic.requests[0]["json"]


@pytest.mark.django_db
def test_they_are_saved_in_preferences_and_shown_folded_on_each_session(client, owner):
    client.force_login(owner)
    client.post("/preferences/", {"instructions": INSTRUCTIONS, "propose_handoff": "on"})
    assert Preferences.objects.get(user=owner).instructions == INSTRUCTIONS
    page = client.get(f"/sessions/{make_session(owner).pk}/").content.decode()
    assert '<details class="instructions card"><summary>Your custom instructions</summary>' in page
    assert "Answer in British English. Keep replies under 200 words." in page


SESSIONS_OWN = "This session is about the billing service only."


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_sessions_own_instructions_follow_the_owners_and_go_on_after_a_handoff(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, instructions=INSTRUCTIONS)
    fake_anthropic.enqueue(Reply.text("Billing it is."), Reply.text(DOCUMENT), Reply.text("Still."))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab, other = (await open_tab(owner, session)) + ((await open_tab(owner, session))[1],)
    await tab.send(message=f"/instructions {SESSIONS_OWN}")
    said = await tab.until("This session&#x27;s instructions are set")
    assert "every request of this session now begins with them" in said
    # Every tab shows them, folded, after the owner's.
    shown = await other.until("This session's instructions</summary>")
    assert "billing service only." in shown
    await tab.send(message="And the invoices?")
    await tab.until("Billing it is.</p>")
    await generation.wait_idle()  # the reply has given its claim up: /handoff is taken
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    reply, document = (request["json"]["system"] for request in fake_anthropic.requests[:2])
    assert reply == document == f"{INSTRUCTIONS}\n\n{SESSIONS_OWN}"  # the document too
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert new.instructions == SESSIONS_OWN  # carried into the session it continues in
    _, new_tab = await open_tab(owner, new)
    await new_tab.send(message="go on")
    await new_tab.until("Still.</p>")
    assert fake_anthropic.requests[2]["json"]["system"] == f"{INSTRUCTIONS}\n\n{SESSIONS_OWN}"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_instructions_alone_shows_them_and_clear_clears_them(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/instructions")
    assert "This session has no instructions of its own." in await tab.until("no instructions")
    await tab.send(message="/instructions Reply in French.")
    await tab.until("are set")
    await tab.send(message="/instructions")
    shown = await tab.until("This session&#x27;s instructions: ")
    assert "This session&#x27;s instructions: Reply in French." in shown
    await tab.send(message="/instructions clear")
    await tab.until("are cleared")
    assert (await db_async(ChatSession.objects.get)(pk=session.pk)).instructions == ""
    fake_anthropic.enqueue(Reply.text("Plain."))
    await tab.send(message="hello")
    await tab.until("Plain.</p>")
    await generation.wait_idle()
    assert "system" not in fake_anthropic.requests[0]["json"]


@pytest.mark.django_db
def test_the_session_menu_sets_them_and_refuses_too_long_ones(client, owner):
    client.force_login(owner)
    session = make_session(owner)
    client.post(f"/sessions/{session.pk}/instructions/", {"instructions": SESSIONS_OWN})
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "<summary>This session's instructions</summary>" in page
    assert f">{SESSIONS_OWN}</textarea>" in page  # the menu's box holds them
    answer = client.post(
        f"/sessions/{session.pk}/instructions/", {"instructions": "x" * 8_001}, follow=True
    )
    assert (
        "Instructions are at most 8,000 characters (these have 8,001)." in answer.content.decode()
    )
    session.refresh_from_db()
    assert session.instructions == SESSIONS_OWN
