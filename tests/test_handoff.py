"""/handoff end to end over the WebSocket, against the fake Anthropic server (SPEC §2, B1–B14)."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from django.db.models.signals import post_save

from foundation.database import short
from sessions import generation, handoff
from sessions.agent import AgentSession, HandoffCancelled
from sessions.models import ChatSession, Entry, PendingPrompt, Preferences

from .conftest import SIX_SECTIONS, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

DOCUMENT = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)


def seeded(document: str, old: ChatSession) -> str:
    """The handoff message of a session handed off from `old` (H9, and the line about recall)."""
    return (
        f"<handoff-context>\n{document}\n</handoff-context>\n\n"
        "The above is a handoff document from a previous session. Use this context to continue "
        "the work seamlessly.\n"
        f"Earlier detail is not lost: the recall tool looks it up in session {old.pk} (the "
        "session this one continues) and the sessions before it, entry by entry."
    )


def document_reply(text: str = DOCUMENT) -> Reply:
    return Reply.text(text)


async def session_count() -> int:
    return await db_async(ChatSession.objects.count)()


async def entries_of(session_id: int) -> list[Entry]:
    return await db_async(
        lambda: list(Entry.objects.filter(session_id=session_id).order_by("id"))
    )()


def redirected_session(html: str) -> int:
    match = re.search(r'data-url="/sessions/(\d+)/"', html)
    assert match, html[-2000:]
    return int(match.group(1))


async def test_with_fewer_than_two_messages_there_is_nothing_to_hand_off(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("Nothing to hand off (no messages yet)")
    assert fake_anthropic.requests == []
    assert await session_count() == 1
    assert await entries_of(session.pk) == []


async def test_the_session_layer_raises_on_the_same_guard(owner, fake_anthropic):
    session = await db_async(make_session)(owner)
    await db_async(session.append_message)("user", [{"type": "text", "text": "only one"}])
    with pytest.raises(handoff.NothingToHandOff):
        await AgentSession(session).handoff()


async def test_a_handoff_switches_to_a_new_session_seeded_with_the_document_only(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(document_reply(), Reply.text("Continuing from the handoff."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff the database work")
    html = await tab.until("data-url=")
    assert "New session started with handoff context" in html
    new_id = redirected_session(html)
    await generation.wait_idle()

    # The prompt went out through the normal path, after the old transcript, with the focus.
    sent = fake_anthropic.requests[0]["json"]["messages"]
    assert sent[0]["content"][0]["text"] == "question 0"
    assert sent[-1]["content"][-1]["text"] == handoff.build_prompt("the database work")

    # Old session: the prompt and the document stay as ordinary messages (H12).
    old_entries = await entries_of(old.pk)
    prompt, reply = old_entries[-2:]
    assert (prompt.kind, prompt.role, prompt.data["purpose"]) == ("message", "user", "handoff")
    assert (reply.kind, reply.role, reply.text, reply.status) == (
        "message",
        "assistant",
        DOCUMENT,
        "complete",
    )

    # New session: lineage and exactly one custom_message (H9, H13, B3).
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert (new.parent_session_id, new.handed_off_from_id, new.owner_id) == (
        old.pk,
        reply.pk,
        owner.pk,
    )
    [seed] = await entries_of(new_id)
    assert (seed.kind, seed.custom_type, seed.display) == ("custom_message", "handoff", True)
    assert seed.text == seeded(DOCUMENT, old)
    assert seed.data["warnings"] == []
    assert (
        not new.generation_id
        and not (await db_async(ChatSession.objects.get)(pk=old.pk)).generation_id
    )

    # The next prompt in the new session carries the handoff message, not the old transcript (H10).
    _, new_tab = await open_tab(owner, new, after=seed.pk)
    await new_tab.send(message="go on")
    await new_tab.until("Continuing from the handoff.")
    assert fake_anthropic.requests[1]["json"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": seeded(DOCUMENT, old)},
                {"type": "text", "text": "go on"},
            ],
        }
    ]


async def test_cancel_closes_the_model_connection_and_creates_nothing(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held_tokens(3, 397))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    await tab.until("Generating handoff")
    await tab.until("token2 ")  # the document is held there
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    assert await session_count() == 1
    reply = (await entries_of(old.pk))[-1]
    assert reply.status == Entry.Status.ABORTED and reply.text.startswith("token0 token1 token2")


async def test_a_cancel_between_the_documents_stream_and_the_switch_creates_nothing(
    owner, fake_anthropic, open_tab
):
    """The document has streamed whole; the run checks its coverage and reads its settings
    before the switch, no stream running. A Cancel then still stops it: the run remembers it
    (nothing streams to abort) and no new session is made."""
    chunks = [f"{part}\n\n" for part in DOCUMENT.split("\n\n")]
    fake_anthropic.enqueue(Reply.held(chunks[:-1], chunks[-1:]))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    # The one database thread held: the run's next read of its settings waits there, after
    # the document's stream has ended and been saved (a short call, on threads of its own).
    free = threading.Event()
    holding = asyncio.ensure_future(db_async(free.wait)(30))
    try:
        fake_anthropic.release()
        async with asyncio.timeout(10):
            while not await short(_document_saved)(old.pk):
                await asyncio.sleep(0.05)
        await tab.send(action="cancel")
        await tab.ws.send_to(text_data="{not json")  # answered once the Cancel was handled
        await tab.until("Malformed message")
    finally:
        free.set()
        await holding
    await tab.until("Handoff cancelled")
    await generation.wait_idle()
    assert await session_count() == 1
    assert len(fake_anthropic.requests) == 1


def _document_saved(session_id: int) -> bool:
    return Entry.objects.filter(
        session_id=session_id, role="assistant", data__purpose="handoff", status="complete"
    ).exists()


async def test_a_generic_abort_during_a_handoff_never_leaks_the_partial_document(
    owner, fake_anthropic
):
    """The reference agent switched with a partial document when its generic abort fired."""
    fake_anthropic.enqueue(Reply.held_tokens(3, 397))
    old = await db_async(make_session)(owner, exchanges=1)
    streaming = asyncio.Event()

    async def listener(event):
        if event.type == "message_update":
            streaming.set()

    agent = AgentSession(old, listener=listener)
    await agent.load()
    task = asyncio.create_task(agent.handoff())
    await asyncio.wait_for(streaming.wait(), 5)
    assert agent.is_generating_handoff
    agent.abort()  # the generic prompt abort, not the handoff run's cancel
    with pytest.raises(HandoffCancelled):
        await task
    assert not agent.is_generating_handoff  # cleared in every outcome (H11)
    assert agent.session.pk == old.pk
    assert await session_count() == 1
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(mode="status", status=429, error_type="rate_limit_error"), "rate limited"),
        (Reply(mode="status", status=529, error_type="overloaded_error"), "overloaded"),
        (Reply(mode="error_event", error_type="overloaded_error"), "overloaded"),
        (Reply(mode="error_event", error_type="api_error"), "API error: fake mid-stream error"),
        (Reply(mode="drop"), "network connection lost"),
        (Reply(mode="no_stop"), "network connection lost"),
        (Reply(mode="empty"), "the model returned no text"),
    ],
)
async def test_a_failure_names_its_reason_is_recorded_and_creates_nothing(
    owner, fake_anthropic, open_tab, reply, reason
):
    fake_anthropic.enqueue(reply)
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    html = await tab.until("Handoff failed:")
    assert re.search(r"Handoff failed: [^<]*" + re.escape(reason), html), html[-1500:]
    await generation.wait_idle()
    assert await session_count() == 1
    recorded = (await entries_of(old.pk))[-1]
    assert recorded.status == Entry.Status.FAILED and reason in recorded.error


async def test_a_second_handoff_while_one_runs_is_refused(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held_tokens(2, 98))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    await tab.until("token1 ")  # the document is held there
    await tab.send(message="/handoff again")
    await tab.until("already running")
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    assert len(fake_anthropic.requests) == 1


async def test_a_prompt_queued_during_the_handoff_is_delivered_in_the_new_session(
    owner, fake_anthropic, open_tab
):
    sections = DOCUMENT.split("\n\n")
    fake_anthropic.enqueue(
        Reply.held(sections[:1], ["\n\n" + s for s in sections[1:]]),
        Reply.text("Answer in the new session."),
    )
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    await tab.until("Goal")  # the document is held after its first section
    await tab.send(message="and then fix the tests")
    await tab.until("Queued")
    fake_anthropic.release()
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    seed, question, answer = await entries_of(new_id)
    assert seed.custom_type == "handoff"
    assert (question.text, answer.text) == ("and then fix the tests", "Answer in the new session.")
    sent = fake_anthropic.requests[1]["json"]["messages"][0]["content"][0]["text"]
    assert sent == seeded(DOCUMENT, old)
    assert "question 0" not in str(fake_anthropic.requests[1]["json"])
    assert await db_async(PendingPrompt.objects.count)() == 0


async def test_missing_sections_are_reported_and_the_switch_still_happens(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(document_reply("## Goal\nShip it.\n\n## Progress\n"))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    [seed] = await entries_of(new_id)
    assert "Empty section: Progress" in seed.data["warnings"]
    assert "Missing section: Next Steps" in seed.data["warnings"]


async def test_an_error_inside_the_switch_leaves_no_new_session(owner, fake_anthropic, open_tab):
    def fail_on_handoff_entry(sender, instance, created, **kwargs):
        if created and instance.custom_type == "handoff":
            raise RuntimeError("disk full")

    fake_anthropic.enqueue(document_reply())
    old = await db_async(make_session)(owner, exchanges=1)
    post_save.connect(fail_on_handoff_entry, sender=Entry)
    try:
        _, tab = await open_tab(owner, old)
        await tab.send(message="/handoff")
        html = await tab.until("Handoff failed:")
        assert "disk full" in html
    finally:
        post_save.disconnect(fail_on_handoff_entry, sender=Entry)
    await generation.wait_idle()
    assert await session_count() == 1
    old_now = await db_async(ChatSession.objects.get)(pk=old.pk)
    assert not old_now.generation_id  # the old session is usable again
    *_, prompt, reply, record = await entries_of(old.pk)
    assert (prompt.data["purpose"], reply.data["purpose"]) == ("handoff", "handoff")
    assert (record.kind, record.custom_type, record.text) == (
        "custom",
        "handoff_failed",
        "Handoff failed: disk full",
    )


async def test_with_review_on_the_user_edits_the_document_before_the_switch(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(user=owner, review_handoff=True)
    fake_anthropic.enqueue(document_reply())
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    html = await tab.until("Review the handoff document")
    await generation.wait_idle()
    assert await session_count() == 1
    reply_id = int(
        re.search(
            r'value="handoff_confirm">\s*<input type="hidden" name="entry" value="(\d+)"', html
        ).group(1)
    )
    await tab.send(
        action="handoff_confirm", entry=str(reply_id), document="## Goal\nEdited by hand."
    )
    new_id = redirected_session(await tab.until("data-url="))
    [seed] = await entries_of(new_id)
    assert seed.text == seeded("## Goal\nEdited by hand.", old)
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    assert (new.parent_session_id, new.handed_off_from_id) == (old.pk, reply_id)
    # A second click cannot start a second session from the same document.
    await tab.send(action="handoff_confirm", entry=str(reply_id), document="again")
    await tab.until("can no longer be used")
    assert await session_count() == 2


async def reviewed_document(owner, fake_anthropic, open_tab, *, while_generating="", then=()):
    """A handoff waiting for review; `while_generating` is typed while its document streams,
    and the model answers `then` afterwards."""
    await db_async(Preferences.objects.create)(user=owner, review_handoff=True)
    fake_anthropic.enqueue(Reply.held(["## Goal\n", "Ship."]), *then)
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    if while_generating:
        await tab.send(message=while_generating)
        await tab.until("Queued")
    fake_anthropic.release()
    html = await tab.until("Review the handoff document")
    await generation.wait_idle()
    reply_id = int(
        re.search(
            r'value="handoff_confirm">\s*<input type="hidden" name="entry" value="(\d+)"', html
        ).group(1)
    )
    return old, tab, reply_id


async def test_a_prompt_typed_during_a_reviewed_handoff_waits_and_goes_to_the_new_session(
    owner, fake_anthropic, open_tab
):
    old, tab, reply_id = await reviewed_document(
        owner,
        fake_anthropic,
        open_tab,
        while_generating="then the tests",
        then=[Reply.text("Answered in the new session.")],
    )
    assert await db_async(PendingPrompt.objects.filter(session=old).count)() == 1
    assert len(fake_anthropic.requests) == 1  # nothing was sent in the old session
    await tab.send(action="handoff_confirm", entry=str(reply_id), document="## Goal\nShip.")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    seed, question, answer = await entries_of(new_id)
    assert (question.text, answer.text) == ("then the tests", "Answered in the new session.")


async def test_two_tabs_confirming_one_document_at_once_start_one_session(
    owner, fake_anthropic, open_tab
):
    old, _, reply_id = await reviewed_document(owner, fake_anthropic, open_tab)
    confirms = await asyncio.gather(
        *(generation.confirm_handoff(old, reply_id, "## Goal\nShip.") for _ in range(2))
    )
    assert sorted(type(result).__name__ for result in confirms) == ["ChatSession", "str"]
    assert "can no longer be used" in next(r for r in confirms if isinstance(r, str))
    assert await session_count() == 2


async def test_a_failure_while_confirming_is_shown_recorded_and_the_socket_goes_on(
    owner, fake_anthropic, open_tab
):
    def fail_on_handoff_entry(sender, instance, created, **kwargs):
        if created and instance.custom_type == "handoff":
            raise RuntimeError("disk full")

    old, tab, reply_id = await reviewed_document(owner, fake_anthropic, open_tab)
    post_save.connect(fail_on_handoff_entry, sender=Entry)
    try:
        await tab.send(action="handoff_confirm", entry=str(reply_id), document="## Goal\nShip.")
        assert "Handoff failed: disk full" in await tab.until("Handoff failed")
    finally:
        post_save.disconnect(fail_on_handoff_entry, sender=Entry)
    assert await session_count() == 1
    assert (await entries_of(old.pk))[-1].text == "Handoff failed: disk full"
    await tab.send(action="handoff_confirm", entry=str(reply_id), document="## Goal\nShip.")
    await tab.until("data-url=")  # the same socket, the same document, now it works


def _hold_the_database(session_id: int, seconds: float, ready) -> None:
    """Another connection writes to the old session and keeps its lock a moment (SQLite: the
    whole database; PostgreSQL: the row)."""
    import time

    from django.db import connection, transaction
    from django.db.models import F

    try:
        with transaction.atomic():
            ChatSession.objects.filter(pk=session_id).update(title=F("title"))
            ready.set()
            time.sleep(seconds)
    finally:
        connection.close()


async def test_a_database_locked_for_a_moment_during_the_switch_only_delays_it(
    owner, fake_anthropic, open_tab
):
    import threading

    fake_anthropic.enqueue(Reply.held(DOCUMENT.split("\n\n")[:3], DOCUMENT.split("\n\n")[3:]))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    ready = threading.Event()
    locker = threading.Thread(target=_hold_the_database, args=(old.pk, 1.0, ready))
    locker.start()
    assert await asyncio.to_thread(ready.wait, 5)
    fake_anthropic.release()  # the document ends while the database is held
    new_id = redirected_session(await tab.until("data-url=", timeout=30))
    await asyncio.to_thread(locker.join)
    await generation.wait_idle()
    new = await db_async(ChatSession.objects.get)(pk=new_id)
    [seed] = await entries_of(new_id)
    assert (new.parent_session_id, seed.custom_type) == (old.pk, "handoff")
    assert (
        not new.generation_id
        and not (await db_async(ChatSession.objects.get)(pk=old.pk)).generation_id
    )


async def test_a_database_error_in_the_middle_of_the_switch_leaves_none_of_it(
    owner, fake_anthropic, open_tab
):
    from django.db import OperationalError

    def database_gone(sender, instance, created, **kwargs):
        if created and instance.custom_type == "handoff":
            raise OperationalError("server closed the connection unexpectedly")

    fake_anthropic.enqueue(document_reply(), Reply.text("Kept."), document_reply())
    old = await db_async(make_session)(owner, exchanges=1)
    await db_async(PendingPrompt.objects.create)(session=old, text="keep me")
    post_save.connect(database_gone, sender=Entry)
    try:
        _, tab = await open_tab(owner, old)
        await tab.send(message="/handoff")
        html = await tab.until("Handoff failed:")
        assert "Handoff failed: server closed the connection unexpectedly" in html
        await generation.wait_idle()
    finally:
        post_save.disconnect(database_gone, sender=Entry)
    assert await session_count() == 1  # no new session, no seed, no lineage
    assert await db_async(Entry.objects.filter(custom_type="handoff").count)() == 0
    assert await db_async(PendingPrompt.objects.filter(session=old).count)() == 0
    assert [e.text for e in (await entries_of(old.pk))[-2:]] == ["keep me", "Kept."]  # sent here
    await tab.send(message="/handoff")  # and once the database is back, it works
    assert redirected_session(await tab.until("data-url="))
