"""Before the switch, the salient items a handoff document dropped are carried over anyway."""

from __future__ import annotations

import asyncio

import pytest

from sessions import generation, handoff, store
from sessions.models import ChatSession, Entry, Preferences

from .conftest import SIX_SECTIONS, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

SECTIONS = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)
COMPLETE = SECTIONS + (
    "\n\nThe crash is in src/importer/reader.py, raising KeyError: 'parentId'. "
    "We decided to stream the file line by line instead of loading it whole."
)


def session_with_facts(owner, model: str = "claude-fake-test") -> ChatSession:
    session = make_session(owner, model=model)
    said = [
        ("user", "The importer in src/importer/reader.py crashes with KeyError: 'parentId'."),
        ("assistant", "I see it: reader.py indexes parentId without checking it."),
        ("user", "We decided to stream the file line by line instead of loading it whole."),
        ("assistant", "Streaming now; src/importer/reader.py reads one line at a time."),
        ("user", "Good. Fix the KeyError: 'parentId' next, in src/importer/reader.py."),
    ]
    for role, text in said:
        session.append_message(role, [{"type": "text", "text": text}])
    return session


async def hand_off(owner, open_tab, session) -> tuple[str, Entry]:
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    html = await tab.until("data-url=", timeout=20)
    await generation.wait_idle()
    new = await db_async(ChatSession.objects.get)(parent_session=session)
    seed = (await db_async(store.get_branch)(new))[0]
    return html, seed


async def test_salient_items_the_document_dropped_are_appended_by_agentweb(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(SECTIONS))  # names none of the facts
    session = await db_async(session_with_facts)(owner)
    _, seed = await hand_off(owner, open_tab, session)
    document = handoff.unwrap(seed.text)
    assert document.startswith(
        SECTIONS + "\n\n## Also carried over\n\n*Added by agentweb, not by the model:"
    )
    addendum = document.split("## Also carried over")[1]
    assert "**File paths**\n\n- `src/importer/reader.py` — named by the user, discussed in 3 entries, recent; last seen in a user message, entry 5 of 5" in addendum  # fmt: skip
    assert "**Error messages**\n\n- `KeyError: 'parentId'`" in addendum
    assert "**Decisions**\n\n- `We decided to stream the file line by line instead of loading it whole.`" in addendum  # fmt: skip
    # The figures judge the model's own text: what agentweb appended is counted apart.
    coverage = seed.data["coverage"]
    assert (coverage["before"]["salient_carried"], coverage["after"]["salient_carried"]) == (0, 0)
    assert coverage["before"]["score"] == coverage["after"]["score"] and coverage["added"] == 3


async def test_nothing_is_appended_when_the_document_carries_every_salient_item(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(COMPLETE))
    session = await db_async(session_with_facts)(owner)
    _, seed = await hand_off(owner, open_tab, session)
    assert handoff.unwrap(seed.text) == COMPLETE
    assert "Also carried over" not in seed.text
    assert seed.data["coverage"]["added"] == 0


async def test_the_handoff_message_shows_what_the_model_carried_and_what_agentweb_appended(
    owner, fake_anthropic, open_tab, client
):
    fake_anthropic.enqueue(Reply.text(SECTIONS))
    session = await db_async(session_with_facts)(owner)
    _, seed = await hand_off(owner, open_tab, session)
    await db_async(client.force_login)(owner)
    page = await db_async(lambda: client.get(f"/sessions/{seed.session_id}/").content.decode())()
    assert (
        "Salient items of the previous session the model carried: <strong>0 of 3</strong> "
        "(0% weighted) in the document. agentweb appended 3 more in a section of its own (not "
        "counted as carried)."
    ) in page


async def test_the_side_by_side_grades_the_models_text_and_shows_what_agentweb_appended(
    owner, fake_anthropic, open_tab, client
):
    fake_anthropic.enqueue(Reply.text(SECTIONS))
    session = await db_async(session_with_facts)(owner)
    _, seed = await hand_off(owner, open_tab, session)
    after = seed.data["coverage"]["after"]
    assert (after["salient_carried"], after["salient"]) == (0, 3)
    await db_async(client.force_login)(owner)
    url = f"/sessions/{seed.session_id}/compare/{session.pk}/"
    page = await db_async(lambda: client.get(url).content.decode())()
    assert (
        f'<strong>{after["score"]}%</strong> <span class="muted">salience-weighted coverage</span> ·\n'
        f"    <strong>0 of 3</strong> salient items of #{session.pk} are in the model's text"
    ) in page
    assert "<strong>3</strong> more appended by agentweb in its own sections" in page
    assert "3 salient items not carried by the model" in page
    salient = page.split('<details class="coverage-missing">', 1)[1].split("</details>", 1)[0]
    assert salient.count('<span class="badge">appended by agentweb</span>') == 3


async def test_with_the_preference_claude_gets_one_round_to_work_them_in(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, amend_handoff=True)
    fake_anthropic.enqueue(Reply.text(SECTIONS), Reply.text(COMPLETE))
    session = await db_async(session_with_facts)(owner)
    _, seed = await hand_off(owner, open_tab, session)
    amend = fake_anthropic.requests[1]["json"]["messages"]
    assert len(amend) == 1 and amend[0]["content"][0]["text"].startswith(
        "Here is a handoff document, inside <document> tags"
    )
    asked = amend[0]["content"][0]["text"]
    assert "- File path: `src/importer/reader.py` — «Good. Fix the KeyError: 'parentId' next, in src/importer/reader.py.»" in asked  # fmt: skip
    assert handoff.unwrap(seed.text) == COMPLETE  # the amended document, nothing to append
    assert seed.data["coverage"]["amended"] is True
    new = await db_async(ChatSession.objects.get)(pk=seed.session_id)
    old_reply = await db_async(Entry.objects.get)(pk=new.handed_off_from_id)
    assert old_reply.text == COMPLETE and old_reply.data["amendment"] is True


async def test_cancel_during_the_amendment_cancels_the_handoff(owner, fake_anthropic, open_tab):
    await db_async(Preferences.objects.create)(user=owner, amend_handoff=True)
    fake_anthropic.enqueue(Reply.text(SECTIONS), Reply.held_tokens(3, 297))
    session = await db_async(session_with_facts)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("token2 ", timeout=20)  # the amendment is held there
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    assert await db_async(ChatSession.objects.count)() == 1


async def test_the_offline_model_appends_instead_of_amending(owner, open_tab, settings):
    settings.ANTHROPIC_API_KEY = ""
    await db_async(Preferences.objects.create)(user=owner, amend_handoff=True)
    session = await db_async(session_with_facts)(owner, model="local")
    _, seed = await hand_off(owner, open_tab, session)
    assert seed.data["coverage"]["amended"] is False
    assert (
        seed.data["coverage"]["after"]["salient_carried"]
        == seed.data["coverage"]["after"]["salient"]
    )
