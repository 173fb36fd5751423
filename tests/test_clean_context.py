"""A clean context: what was cancelled or failed stays visible, marked, and never reaches a later
request; a tool call without a result is answered for it (the reference agent's rule). Every
test reads the requests the model's server received."""

from __future__ import annotations

import asyncio
import json

import pytest

from sessions import session_file
from sessions.models import ChatSession, Entry

from .conftest import FAKE_MODEL, SIX_SECTIONS, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

HANDOFF_PROMPT = "You are handing this conversation off to a fresh session"
DOCUMENT = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)


def sent(request: dict) -> str:
    """Everything a request told the model, as one text."""
    return json.dumps(request["json"]["messages"], ensure_ascii=False)


async def cancel_a_handoff(fake_anthropic, tab, partial: str) -> None:
    """/handoff, whose document streams `partial` and is held there, then Cancel."""
    fake_anthropic.enqueue(Reply.held(["## Goal\n", partial], ["never sent"]))
    await tab.send(message="/handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.until(partial)
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    fake_anthropic.disconnects = 0


async def context_size(session: ChatSession) -> int:
    return (await db_async(ChatSession.objects.get)(pk=session.pk)).context_tokens


async def test_cancelled_handoffs_reach_neither_the_next_prompt_nor_the_next_handoff(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner, exchanges=2)
    before = await context_size(session)
    _, tab = await open_tab(owner, session)
    await cancel_a_handoff(fake_anthropic, tab, "First secret plan")
    await cancel_a_handoff(fake_anthropic, tab, "Second secret plan")
    assert await context_size(session) == before  # the cancelled attempts add nothing

    fake_anthropic.enqueue(Reply.text("Going on."))
    await tab.send(message="go on with question 1")
    await tab.until("Going on.")
    await tab.until_idle()  # a /handoff sent while the reply still ends would be refused
    prompt_request = sent(fake_anthropic.requests[-1])
    assert "go on with question 1" in prompt_request
    assert HANDOFF_PROMPT not in prompt_request
    assert "secret plan" not in prompt_request

    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    handoff_request = sent(fake_anthropic.requests[-1])
    assert handoff_request.count(HANDOFF_PROMPT) == 1  # its own request, once
    assert "secret plan" not in handoff_request
    assert "answer 1" in handoff_request and "Going on." in handoff_request

    # The cancelled attempts stay in the old session, marked.
    kept = await db_async(
        lambda: list(Entry.objects.filter(session=session, status=Entry.Status.ABORTED))
    )()
    assert [entry.text for entry in kept] == ["## Goal\nFirst secret plan", "## Goal\nSecond secret plan"]  # fmt: skip


async def test_a_cancelled_or_failed_reply_is_shown_marked_and_never_sent_again(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(
        Reply.held(["Half an ", "answer"], ["never sent"]),
        Reply(
            mode="error_event", error_type="overloaded_error", chunks=["Broken ", "frag", "ment"]
        ),
        Reply.text("A whole answer."),
    )
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first try")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.until("Half an ")
    await tab.send(action="cancel")
    await tab.until("Cancelled")
    await tab.send(message="second try")
    await tab.until("Failed:")
    await tab.send(message="third try")
    await tab.until("A whole answer.")
    last = sent(fake_anthropic.requests[-1])
    assert "first try" in last and "second try" in last and "third try" in last
    assert "Half an" not in last and "Broken" not in last
    page = "".join(tab.received)
    assert "status--aborted" in page and "status--failed" in page


def imported_session_with_dangling_calls(owner) -> ChatSession:
    """A session of the reference agent: a reply calls `edit` and the session goes on without
    its result; a cancelled reply holds a `bash` call that never ran."""
    lines = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {"type": "message", "id": "u1", "parentId": None,
         "message": {"role": "user", "content": "fix the parser"}},
        {"type": "message", "id": "a1", "parentId": "u1",
         "message": {"role": "assistant", "stopReason": "toolUse", "content": [
             {"type": "text", "text": "Editing it."},
             {"type": "toolCall", "id": "call_edit", "name": "edit", "arguments": {"path": "parser.py"}},
         ]}},
        {"type": "message", "id": "u2", "parentId": "a1",
         "message": {"role": "user", "content": "did it work?"}},
        {"type": "message", "id": "a2", "parentId": "u2",
         "message": {"role": "assistant", "stopReason": "aborted", "content": [
             {"type": "toolCall", "id": "call_bash", "name": "bash", "arguments": {"command": "rm -rf build"}},
         ]}},
    ]  # fmt: skip
    return session_file.import_jsonl(owner, [json.dumps(line) for line in lines])


async def test_a_tool_call_without_a_result_is_answered_for_it_and_a_cancelled_call_is_left_out(
    owner, fake_anthropic, open_tab
):
    session = await db_async(imported_session_with_dangling_calls)(owner)
    await db_async(session.change_model)(FAKE_MODEL)
    fake_anthropic.enqueue(Reply.text("Let me look again."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="and now?")
    await tab.until("Let me look again.")
    messages = fake_anthropic.requests[-1]["json"]["messages"]
    texts = [block["text"] for message in messages for block in message["content"]]
    assert texts == [
        "fix the parser",
        "Editing it.",
        '[Assistant tool call]: edit(path="parser.py")',
        "[Tool result: edit, error]: No result provided",
        "did it work?",
        "and now?",
    ]
    assert [message["role"] for message in messages] == ["user", "assistant", "user"]
    assert "rm -rf build" not in sent(fake_anthropic.requests[-1])


async def test_a_cancelled_automatic_handoff_sends_the_prompt_without_its_request(
    owner, fake_anthropic, open_tab, settings
):
    from sessions.models import Preferences

    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=10)
    session = await db_async(make_session)(owner, exchanges=1)
    await db_async(ChatSession.objects.filter(pk=session.pk).update)(context_tokens=50_000)
    fake_anthropic.enqueue(Reply.held(["## Goal\n", "Auto plan"], ["never sent"]))
    fake_anthropic.enqueue(Reply.text("Answered here."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="the next message")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.until("Auto plan")
    await tab.send(action="cancel")
    await tab.until("Answered here.")
    last = sent(fake_anthropic.requests[-1])
    assert "the next message" in last
    assert HANDOFF_PROMPT not in last and "Auto plan" not in last


async def test_after_a_handoff_the_old_session_says_where_it_continued_instead_of_suggesting_one(
    owner, fake_anthropic, open_tab, client
):
    session = await db_async(make_session)(owner, exchanges=2)
    await db_async(ChatSession.objects.filter(pk=session.pk).update)(context_tokens=190_000)
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(session.get_absolute_url())).content.decode()
    assert "type <code>/handoff</code> to continue in a fresh session" in page

    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    new = await db_async(lambda: ChatSession.objects.get(parent_session=session))()
    await db_async(ChatSession.objects.filter(pk=session.pk).update)(context_tokens=190_000)
    page = (await db_async(client.get)(session.get_absolute_url())).content.decode()
    assert f'this work continued in <a href="/sessions/{new.pk}/">session #{new.pk}</a>' in page
    assert "type <code>/handoff</code> to continue" not in page
    # The exchange itself stays in the old session (H12).
    kinds = await db_async(
        lambda: list(Entry.objects.filter(session=session).values_list("role", "data__purpose"))
    )()
    assert kinds[-2:] == [("user", "handoff"), ("assistant", "handoff")]
