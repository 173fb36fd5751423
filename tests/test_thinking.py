"""Thinking levels (issue 11, item 5): set from the page or /thinking, recorded as a
thinking_level_change entry, sent as Claude's extended-thinking budget, streamed folded
above the reply; the offline model ignores the level and says so."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions import generation, session_file, store
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply


def level_of(session: ChatSession) -> str:
    return ChatSession.objects.get(pk=session.pk).thinking_level


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_slash_thinking_sets_the_level_and_claude_gets_the_budget(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Thought it through."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="/thinking high")
    html = await tab.until("Thinking level: high")
    assert 'class="entry entry--thinking_level_change' in html
    await tab.send(message="Plan the migration")
    await tab.until("Thought it through.</p>")
    await generation.wait_idle()
    body = fake_anthropic.requests[-1]["json"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 24_576}
    assert body["max_tokens"] > 24_576
    change = await db_async(lambda: Entry.objects.get(kind="thinking_level_change"))()
    assert change.data == {"fields": {"thinkingLevel": "high"}}
    assert [m["content"][0]["text"] for m in body["messages"]] == ["Plan the migration"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_with_thinking_off_no_thinking_is_asked_for(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Plain."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Hello")
    await tab.until("Plain.</p>")
    await generation.wait_idle()
    assert "thinking" not in fake_anthropic.requests[-1]["json"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_thinking_streams_folded_above_the_reply_and_is_kept_with_it(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    await db_async(session.change_thinking)("low")
    fake_anthropic.enqueue(
        Reply(
            chunks=["The answer", " is 42."],
            thinking=["Let me see: ", "six times seven."],
            hold_after=0,
        )
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="What is six times seven?")
    html = await tab.until("six times seven.</div>")  # thinking streamed before any text
    assert '<div id="live-thinking" hx-swap-oob="beforeend">Let me see: ' in html
    assert "The answer" not in html
    fake_anthropic.release()
    html = await tab.until("The answer is 42.</p>")
    assert '<details class="thinking"><summary>Thinking</summary>' in html
    await generation.wait_idle()
    reply = (await db_async(store.get_branch)(session))[-1]
    assert reply.content == [
        {
            "type": "thinking",
            "thinking": "Let me see: six times seven.",
            "signature": "fake-signature",
        },
        {"type": "text", "text": "The answer is 42."},
    ]
    assert fake_anthropic.requests[-1]["json"]["thinking"]["budget_tokens"] == 2_048


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tab_that_joins_mid_reply_sees_the_thinking_so_far(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    await db_async(session.change_thinking)("medium")
    fake_anthropic.enqueue(Reply(chunks=["Done."], thinking=["Weighing options."], hold_after=0))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Think")
    await tab.until("Weighing options.")
    _, late = await open_tab(owner, session)
    html = await late.until('id="live-thinking"')
    assert '<div id="live-thinking" class="plain">Weighing options.</div>' in html
    fake_anthropic.release()
    await generation.wait_idle()


def status_line(html: str) -> str:
    """The last status line in what a tab received."""
    return html[html.rindex('<div id="status"') :]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_status_line_pushed_to_a_tab_shows_the_level_and_locks_the_pickers_while_a_reply_runs(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply(chunks=["Working", " on it."], hold_after=1))
    fake_anthropic.enqueue(Reply.text("Again."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="/thinking high")
    chosen = status_line(await tab.until("Thinking level: high"))
    assert '<option value="high" selected>high</option>' in chosen
    assert '<select id="model-picker" name="model">' in chosen
    await tab.send(message="Go")
    running = status_line(await tab.until("Working"))
    assert '<select id="model-picker" name="model" disabled>' in running
    assert (
        '<select id="thinking-picker" name="level" disabled aria-describedby="thinking-note">'
        in (running)
    )
    assert '<option value="high" selected>high</option>' in running
    fake_anthropic.release()
    idle = status_line(await tab.until_idle())
    assert '<select id="model-picker" name="model">' in idle
    assert '<select id="thinking-picker" name="level" aria-describedby="thinking-note">' in idle
    await tab.send(message="/thinking low")
    lowered = status_line(await tab.until("Thinking level: low"))
    assert '<option value="low" selected>low</option>' in lowered
    assert '<option value="high">high</option>' in lowered
    await tab.send(message="Once more")
    await tab.until("Again.")
    assert '<option value="low" selected>low</option>' in status_line(await tab.until_idle())
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_each_sessions_pushed_pickers_post_to_that_session(owner, open_tab):
    first, second = [await db_async(make_session)(owner) for _ in range(2)]
    for session, other in ((first, second), (second, first)):
        _, tab = await open_tab(owner, session)
        await tab.send(message="/thinking high")
        line = status_line(await tab.until("Thinking level: high"))
        assert f'hx-post="/sessions/{session.pk}/model/"' in line
        assert f'action="/sessions/{session.pk}/thinking/"' in line
        assert f"/sessions/{other.pk}/" not in line


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_slash_thinking_alone_tells_the_level_and_a_wrong_one_is_refused(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/thinking")
    html = await tab.until("notice")
    assert "Thinking level: off. Set it with /thinking off, low, medium or high." in html
    await tab.send(message="/thinking huge")
    html = await tab.until("notice--error")
    assert "Unknown thinking level “huge”: choose off, low, medium or high." in html
    assert "/thinking huge</textarea>" in html  # what was typed comes back
    assert await db_async(level_of)(session) == "off"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_offline_model_ignores_the_level_and_says_so(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    await db_async(session.change_thinking)("high")
    _, tab = await open_tab(owner, session)
    await tab.send(message="Hello offline")
    html = await tab.until("entry--assistant status--complete")
    assert (
        "The offline model does not think before it replies: it ignores the thinking level." in html
    )
    await generation.wait_idle()


@pytest.mark.django_db
def test_the_page_picker_sets_the_level_for_every_tab(client, owner):
    session = make_session(owner)
    client.force_login(owner)
    page = client.get(session.get_absolute_url()).content.decode()
    assert '<option value="off" selected>off</option>' in page
    response = client.post(
        reverse("chat:thinking", args=[session.pk]), {"level": "medium"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 204 and level_of(session) == "medium"
    page = client.get(session.get_absolute_url()).content.decode()
    assert '<option value="medium" selected>medium</option>' in page
    assert "Thinking level: medium" in page
    bad = client.post(
        reverse("chat:thinking", args=[session.pk]), {"level": "max"}, HTTP_HX_REQUEST="true"
    )
    assert "Unknown thinking level “max”" in bad.content.decode()


@pytest.mark.django_db
def test_the_level_follows_the_branch_and_survives_export_and_import(owner):
    session = make_session(owner, exchanges=1)
    before = store.get_branch(session)[-1]
    session.change_thinking("high")
    session.append_message("user", [{"type": "text", "text": "think hard"}])
    lines = "".join(session_file.export_jsonl(session)).splitlines()
    assert session_file.import_jsonl(owner, lines).thinking_level == "high"
    session.move_leaf(before.pk)  # back before the change
    assert level_of(session) == "off"


@pytest.mark.django_db
def test_the_new_session_of_a_handoff_keeps_the_thinking_level(owner):
    from .test_browse import hand_off

    session = make_session(owner, exchanges=1)
    ChatSession.objects.filter(pk=session.pk).update(thinking_level="high")
    session.refresh_from_db()
    new = hand_off(session, "## Goal\nGo on")
    assert ChatSession.objects.get(pk=new.pk).thinking_level == "high"
