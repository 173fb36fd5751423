"""A handoff draft kept ready (issue 55, item 1): once a session's context passes its owner's
share, the document is written while the session is idle, and `/handoff` switches with it at
once, without a model call; a message sent meanwhile cancels it and is answered at once; a
session that moved on gets a new draft; a focus the draft did not have is written anew."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from django.conf import settings

from sessions import drafts, generation
from sessions.models import ChatSession, Entry, HandoffDraft, Preferences

from . import servers
from .conftest import FAKE_MODEL, database_away, db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, redirected_session

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = "You are handing this conversation off to a fresh session"  # the request's first words


@pytest.fixture
def drafting(settings: Any, owner: Any) -> None:
    """Drafts on, from 10 % of a window of 20,000 tokens: a reply that reports 5,000 passes."""
    settings.AGENTWEB_HANDOFF_DRAFTS = True
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 20_000, "max_output": 1_000},
    }
    Preferences.objects.create(user=owner, draft_handoff_at=10)


def long_reply(text: str) -> Reply:
    return Reply(chunks=[text], input_tokens=5_000, output_tokens=5)


def asked_for_a_document(request: dict[str, Any]) -> bool:
    last = request["json"]["messages"][-1]["content"]
    return any(ASKED in block.get("text", "") for block in last)


async def draft_of(session: ChatSession) -> HandoffDraft:
    return await db_async(HandoffDraft.objects.get)(session_id=session.pk)


@pytest.mark.asyncio
async def test_a_draft_written_while_idle_is_switched_to_without_another_model_call(
    owner, fake_anthropic, open_tab, drafting
):
    document = DOCUMENT.replace("Goal details.", "Ship the importer (drafted).")
    fake_anthropic.enqueue(
        long_reply("Sure."), Reply(chunks=[document], input_tokens=6_100, output_tokens=240)
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()  # the draft, written beside the chat
    assert len(fake_anthropic.requests) == 2 and asked_for_a_document(fake_anthropic.requests[1])
    draft = await draft_of(old)
    assert (draft.document, draft.input_tokens, draft.output_tokens) == (document, 6_100, 240)
    assert "Ship the importer (drafted)." not in "".join(tab.received)  # not shown before
    said = "Handoff ready: <code>/handoff</code> switches at once."
    assert said in await tab.until("Handoff ready")  # the status line, pushed when kept
    _, reloaded = await open_tab(owner, old)  # and on a page opened now
    assert said in await reloaded.until("Handoff ready")

    started = time.monotonic()
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    assert time.monotonic() - started < 1.0
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 2  # no model call at /handoff
    seed = await db_async(lambda: Entry.objects.filter(session_id=new_id).first().text)()
    assert "Ship the importer (drafted)." in seed
    reply = await db_async(
        lambda: Entry.objects.filter(session_id=old.pk, role="assistant").last()
    )()
    assert reply.data["handoff"]["draft"] is True
    assert (reply.input_tokens, reply.output_tokens) == (6_100, 240)  # in the session's usage


@pytest.mark.asyncio
async def test_a_draft_begins_as_the_sessions_last_request_did_so_the_prompt_cache_serves_it(
    owner, fake_anthropic, open_tab, drafting
):
    fake_anthropic.enqueue(
        long_reply("Sure."),
        Reply(chunks=[DOCUMENT], input_tokens=300, output_tokens=240, cache_read_tokens=5_800),
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    chat, draft = (request["json"] for request in fake_anthropic.requests)
    # Both ask the API to cache the prompt (its automatic breakpoint on the last block) …
    assert chat["cache_control"] == draft["cache_control"] == {"type": "ephemeral"}
    # … and the draft's prompt begins with the chat's whole prompt: tools, system and turns.
    assert [tool["name"] for tool in draft["tools"]] == ["todo_write", "handoff"]
    assert draft["tools"] == chat["tools"] and draft.get("system") == chat.get("system")
    assert draft["messages"][: len(chat["messages"])] == chat["messages"]
    assert draft["messages"][len(chat["messages"])]["content"][0]["text"] == "Sure."
    kept = await draft_of(old)
    assert (kept.input_tokens, kept.cache_read_tokens) == (300, 5_800)


@pytest.mark.asyncio
async def test_a_draft_the_database_cannot_keep_is_given_up_and_the_handoff_writes_its_own(
    owner, fake_anthropic, open_tab, drafting, caplog
):
    def keeping_the_draft(sql: str) -> bool:  # sets the document: not the claim
        table = f'UPDATE "{HandoffDraft._meta.db_table}"'
        return sql.startswith(table) and '"document"' in sql.split(" WHERE ")[0]

    drafted = DOCUMENT.replace("Goal details.", "Ship the importer (drafted).")
    written = DOCUMENT.replace("Goal details.", "Ship the importer (written at /handoff).")
    fake_anthropic.enqueue(long_reply("Sure."), Reply.text(drafted), Reply.text(written))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    async with database_away(keeping_the_draft):
        with caplog.at_level("INFO", logger="sessions"):
            await tab.send(message="go on")
            await tab.until("Sure.</p>")
            await generation.wait_idle()
    assert asked_for_a_document(fake_anthropic.requests[1])
    assert (
        f"session {old.pk}: no handoff draft: the database did not answer: "
        "server closed the connection unexpectedly"
    ) in caplog.messages
    assert not (await draft_of(old)).document
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    seed = await db_async(lambda: Entry.objects.filter(session_id=new_id).first().text)()
    assert "Ship the importer (written at /handoff)." in seed


@pytest.mark.asyncio
async def test_a_message_sent_during_the_draft_cancels_it_and_is_answered_at_once(
    owner, fake_anthropic, open_tab, drafting
):
    fake_anthropic.enqueue(
        long_reply("Sure."),
        Reply.held(["## Goal\nHalf a draft"]),
        Reply.text("Answered at once."),
        Reply.text(DOCUMENT),  # the draft written after that reply
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the draft streams, held
    await tab.send(message="one more question")
    await tab.until("Answered at once.</p>", timeout=5)
    assert await asyncio.to_thread(
        fake_anthropic.wait_for_disconnect
    )  # the draft's call was closed
    fake_anthropic.release()
    await generation.wait_idle()
    draft = await draft_of(old)
    assert "Half a draft" not in draft.document
    assert draft.writing_until is None  # its lease given back


@pytest.mark.asyncio
async def test_a_session_that_moved_on_gets_a_new_draft_and_a_new_focus_is_written_anew(
    owner, fake_anthropic, open_tab, drafting
):
    first = DOCUMENT.replace("Goal details.", "The first draft.")
    second = DOCUMENT.replace("Goal details.", "The second draft.")
    focused = DOCUMENT.replace("Goal details.", "About the tests only.")
    fake_anthropic.enqueue(
        long_reply("Sure."),
        Reply.text(first),
        long_reply("Noted."),
        Reply.text(second),
        Reply.text(focused),
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    await tab.send(message="and then?")
    await tab.until("Noted.</p>")
    await generation.wait_idle()
    assert "The second draft." in (await draft_of(old)).document
    # The second was the first brought up to date by a short request: the draft and the turns
    # after it, none of those before.
    [update] = fake_anthropic.requests[3]["json"]["messages"]
    assert update["content"][0]["text"].startswith(f"<handoff-document>\n{first}\n")
    assert "and then?" in update["content"][0]["text"] and "question 0" not in str(update)
    await tab.send(message="/handoff the tests")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 5
    assert fake_anthropic.requests[4]["json"]["messages"][-1]["content"][-1]["text"].endswith(
        "Additional focus: the tests"
    )
    seed = await db_async(lambda: Entry.objects.filter(session_id=new_id).first().text)()
    assert "About the tests only." in seed and "The second draft." not in seed


@pytest.mark.asyncio
async def test_at_handoff_a_draft_a_few_turns_old_is_brought_up_to_date_by_a_short_request(
    owner, fake_anthropic, open_tab, drafting
):
    first = DOCUMENT.replace("Goal details.", "The first draft.")
    updated = DOCUMENT.replace("Goal details.", "Updated with the parser work.")
    fake_anthropic.enqueue(
        long_reply("Sure."),
        Reply.text(first),
        long_reply("The parser is done."),
        Reply(chunks=[updated], input_tokens=700, output_tokens=240),
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    # No draft after the next reply: the one written stays a reply behind.
    await db_async(Preferences.objects.filter(user=owner).update)(draft_handoff_at=0)
    await tab.send(message="now the parser")
    await tab.until("The parser is done.</p>")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 3

    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    [asked] = fake_anthropic.requests[3]["json"]["messages"]
    text = asked["content"][0]["text"]
    assert text.startswith(f"<handoff-document>\n{first}\n</handoff-document>\n\n<later-turns>")
    assert "now the parser" in text and "The parser is done." in text
    assert "question 0" not in text and "Sure." not in text  # what the draft covered already
    assert text.endswith("Reply with the whole document only.")
    seed = await db_async(lambda: Entry.objects.filter(session_id=new_id).first().text)()
    assert "Updated with the parser work." in seed and "The first draft." not in seed


@pytest.mark.asyncio
async def test_no_draft_is_written_when_the_preference_is_zero(
    owner, fake_anthropic, open_tab, drafting
):
    await db_async(Preferences.objects.filter(user=owner).update)(draft_handoff_at=0)
    fake_anthropic.enqueue(long_reply("Sure."))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 1
    assert not await db_async(HandoffDraft.objects.exists)()


@pytest.mark.asyncio
async def test_offline_the_draft_is_the_offline_document(owner, open_tab, drafting):
    await db_async(Preferences.objects.filter(user=owner).update)(draft_handoff_at=1)
    old = await db_async(make_session)(owner, model="local", exchanges=3)
    _, tab = await open_tab(owner, old)
    notes = " ".join(f"note{n}" for n in range(3_000))  # past 1 % of the offline window
    await tab.send(message=f"We decided to keep the importer in src/importer.py. {notes}")
    await tab.until("status-generating")
    await tab.until_idle()
    await generation.wait_idle()
    document = (await draft_of(old)).document
    assert document.startswith("## Goal") and "src/importer.py" in document


CLAIMS = """
import sys, time, django
django.setup()
from sessions import drafts
from sessions.models import ChatSession
writer, go, *ids = sys.argv[1:]
for n, session in enumerate(ChatSession.objects.filter(pk__in=ids).order_by("pk")):
    time.sleep(max(0.0, float(go) + n / 10 - time.time()))  # both processes at one moment
    print(session.pk, drafts.claim(session, writer), flush=True)
"""


def test_two_processes_asking_at_one_moment_for_a_sessions_draft_one_gets_it(owner):
    """Five sessions with no draft yet, and five with one written a few turns ago."""
    sessions = [make_session(owner, exchanges=2).pk for _ in range(10)]
    for pk in sessions[5:]:
        HandoffDraft.objects.create(session_id=pk, leaf_id=1, document="## Goal\nAn old draft")
    go = time.time() + 5  # after both have started Django
    env = {
        **os.environ,
        "DATABASE_URL": servers.test_database_url(),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "DJANGO_SETTINGS_MODULE": "agentweb.settings",
    }
    runs = {
        writer: subprocess.Popen(
            [sys.executable, "-c", CLAIMS, writer, str(go), *map(str, sessions)],
            cwd=servers.ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in ("process-a", "process-b")
    }
    got: dict[int, list[str]] = {pk: [] for pk in sessions}
    for writer, run in runs.items():
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        for line in out.splitlines():
            pk, claimed = line.split()
            if claimed == "True":
                got[int(pk)].append(writer)
    assert all(len(writers) == 1 for writers in got.values()), got
    for pk, [writer] in got.items():
        assert HandoffDraft.objects.get(session_id=pk).writer == writer


def test_one_writer_holds_a_sessions_draft_at_a_time(owner):
    session = make_session(owner, exchanges=2)
    assert drafts.claim(session, "process-a")
    assert not drafts.claim(session, "process-b")  # another process, the same moment
    drafts.release(session.pk, "process-a")
    assert drafts.claim(session, "process-b")


@pytest.mark.asyncio
async def test_the_owners_writer_model_writes_the_draft(owner, fake_anthropic, open_tab, drafting):
    await db_async(Preferences.objects.filter(user=owner).update)(handoff_writer="claude-haiku-4-5")
    fake_anthropic.enqueue(long_reply("Sure."), Reply.text(DOCUMENT))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    chat, draft = (request["json"]["model"] for request in fake_anthropic.requests)
    assert (chat, draft) == (FAKE_MODEL, "claude-haiku-4-5")
    assert (await draft_of(old)).model == "claude-haiku-4-5"


@pytest.mark.asyncio
async def test_a_prompt_taken_by_another_process_stops_the_draft_written_here(
    owner, fake_anthropic, open_tab, drafting
):
    fake_anthropic.enqueue(long_reply("Sure."), Reply.held(["## Goal\nHalf a draft"]))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the draft streams, held
    # Another process takes the session for a prompt: its claim is in the session's row.
    await db_async(ChatSession.objects.filter(pk=old.pk).update)(generation_id="elsewhere")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5.0)
    fake_anthropic.release()
    await generation.wait_idle()
    draft = await draft_of(old)
    assert (draft.document, draft.writing_until) == ("", None)  # nothing kept, lease given back


@pytest.mark.asyncio
async def test_what_drafts_cost_counts_in_the_sessions_usage_once_used_or_not(
    owner, fake_anthropic, open_tab, drafting
):
    fake_anthropic.enqueue(
        long_reply("Sure."),  # 5,000 in, 5 out
        Reply(chunks=[DOCUMENT], input_tokens=6_000, output_tokens=200),
        long_reply("Noted."),
        Reply(chunks=[DOCUMENT], input_tokens=900, output_tokens=210),  # the update
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    await tab.send(message="and then?")
    await tab.until("Noted.</p>")
    await generation.wait_idle()
    _, reloaded = await open_tab(owner, old)
    status = await reloaded.until("status-usage")
    # Both drafts were paid for: the first, replaced, and the second, kept but not used yet.
    assert "This session: 16,900 in · 420 out" in status
    assert "(handoff drafts not used: 6,900 in · 410 out" in status

    await tab.send(message="/handoff")  # uses the second: its tokens move to the reply
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 4
    _, after = await open_tab(owner, await db_async(ChatSession.objects.get)(pk=old.pk))
    status = await after.until("status-usage")
    assert "This session: 16,900 in · 420 out" in status  # the same total: counted once
    assert "(handoff drafts not used: 6,000 in · 200 out" in status
    assert new_id != old.pk


@pytest.mark.asyncio
async def test_the_automatic_handoff_switches_with_a_ready_draft_without_a_model_call(
    owner, fake_anthropic, open_tab, drafting
):
    """The owner hands off automatically at 30 % of the window (6,000 tokens)."""
    await db_async(Preferences.objects.filter(user=owner).update)(auto_handoff_at=30)
    document = DOCUMENT.replace("Goal details.", "Ship the importer (drafted).")
    fake_anthropic.enqueue(
        long_reply("Sure."),
        Reply(chunks=[document], input_tokens=6_100, output_tokens=240),
        Reply.text("Answered in the new session."),
    )
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="go on")
    await tab.until("Sure.</p>")
    await generation.wait_idle()
    await tab.until("Handoff ready")

    started = time.monotonic()
    await tab.send(message="now the tests for the importer, please " * 120)  # past 6,000
    new_id = redirected_session(await tab.until("data-url="))
    assert time.monotonic() - started < 1.0
    # The page goes there at once, while the prompt is answered: it shows the answer.
    _, new_tab = await open_tab(owner, await db_async(ChatSession.objects.get)(pk=new_id))
    await new_tab.until("Answered in the new session.</p>")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 3  # the reply, the draft, the prompt: no document
    sent = fake_anthropic.requests[2]["json"]["messages"]
    assert "Ship the importer (drafted)." in sent[0]["content"][0]["text"]  # the seed
    assert sent[-1]["content"][-1]["text"].startswith("now the tests for the importer")
