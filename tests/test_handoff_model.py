"""`/handoff --model <id> [focus]` (issue 55, item 3): the document is written as always, and
the new session runs on the model named; an unknown model is refused with those offered."""

from __future__ import annotations

import re

import pytest

from sessions import generation
from sessions.models import ChatSession, Entry, Preferences

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


async def test_the_owners_writer_model_writes_the_document_and_the_session_keeps_its_own(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, handoff_writer="claude-haiku-4-5")
    fake_anthropic.enqueue(Reply.text(DOCUMENT), Reply.text("Still on the session's model."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    assert fake_anthropic.requests[0]["json"]["model"] == "claude-haiku-4-5"
    document = await db_async(
        lambda: Entry.objects.filter(session_id=old.pk, role="assistant").last()
    )()
    assert document.model == "claude-haiku-4-5"  # its tokens are priced as Haiku's
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert new.model == FAKE_MODEL
    _, new_tab = await open_tab(owner, new)
    await new_tab.send(message="go on")
    await new_tab.until("Still on the session's model.")
    assert fake_anthropic.requests[1]["json"]["model"] == FAKE_MODEL


async def test_a_writer_model_the_server_does_not_offer_leaves_the_sessions_own(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, handoff_writer="gpt-5")
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    await generation.wait_idle()
    assert fake_anthropic.requests[0]["json"]["model"] == FAKE_MODEL


async def test_the_preferences_page_offers_the_writer_models(owner, client, fake_anthropic):
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)("/preferences/")).content.decode()
    assert "Write handoff documents and drafts with" in page
    assert '<option value="" selected>Each session&#x27;s own model</option>' in page
    assert '<option value="claude-haiku-4-5">Claude Haiku 4.5</option>' in page
    await db_async(client.post)("/preferences/", {"handoff_writer": "claude-haiku-4-5"})
    saved = await db_async(Preferences.objects.get)(user=owner)
    assert saved.handoff_writer == "claude-haiku-4-5"


async def reviewing(owner, fake_anthropic, open_tab):
    """A handoff of a session on the fake model, waiting for review; its tab and the page."""
    await db_async(Preferences.objects.create)(user=owner, review_handoff=True)
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    html = await tab.until("Review the handoff document")
    await generation.wait_idle()
    return old, tab, html


def reply_of(html: str) -> int:
    found = re.search(r'"handoff_confirm">\s*<input type="hidden" name="entry" value="(\d+)"', html)
    return int(found.group(1))


async def test_the_review_panel_chooses_the_model_the_new_session_runs_on(
    owner, fake_anthropic, open_tab
):
    old, tab, html = await reviewing(owner, fake_anthropic, open_tab)
    assert '<label for="review-model">The new session runs on</label>' in html
    assert f'<option value="{FAKE_MODEL}" selected>' in html
    assert '<option value="claude-haiku-4-5">Claude Haiku 4.5</option>' in html
    await tab.send(action="handoff_confirm", entry=reply_of(html), document=DOCUMENT, model="gpt-5")
    assert "Unknown model “gpt-5”: choose one of local, " in await tab.until("Unknown model")
    await tab.send(
        action="handoff_confirm", entry=reply_of(html), document=DOCUMENT, model="claude-haiku-4-5"
    )
    new_id = redirected_session(await tab.until("data-url="))
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert new.model == "claude-haiku-4-5"


async def test_a_review_survives_a_reload_and_a_discard_ends_it_for_every_tab(
    owner, fake_anthropic, open_tab, client
):
    old, tab, html = await reviewing(owner, fake_anthropic, open_tab)
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(old.get_absolute_url())).content.decode()
    assert "<h2>Review the handoff document</h2>" in page  # a reload: the panel is there
    assert f'name="entry" value="{reply_of(html)}"' in page
    assert "Next Steps details.</textarea>" in page  # with the document as written
    _, other = await open_tab(owner, old)
    await tab.send(action="handoff_discard")
    assert 'id="review" class="review" hx-swap-oob="true"></section>' in await other.until(
        'id="review" class="review" hx-swap-oob="true"></section>'
    )  # the other tab's panel closed too
    page = (await db_async(client.get)(old.get_absolute_url())).content.decode()
    assert "Review the handoff document" not in page


async def test_the_slash_menu_offers_a_handoff_to_each_other_model(owner, client, fake_anthropic):
    session = await db_async(make_session)(owner)
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(session.get_absolute_url())).content.decode()
    offered = re.findall(r'data-name="handoff --model ([\w.-]+)"', page)
    assert offered == ["local", "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]
    assert "Continue in a new session on Claude Haiku 4.5</span>" in page
