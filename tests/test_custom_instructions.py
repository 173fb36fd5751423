"""Custom instructions (issue 56, item 2, the user's own): Preferences → *Custom instructions*
are the system prompt of every request to the model, a handoff's included, and shown folded at
the top of each session."""

from __future__ import annotations

import pytest

from sessions import generation
from sessions.models import Preferences

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
