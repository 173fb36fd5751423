"""No stuck state: a generation whose process died shows as interrupted; the session goes on."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from sessions import generation
from sessions.generation import claims
from sessions.generation.events import StatusShown
from sessions.models import ChatSession, Entry
from sessions.partials.events import render

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def crashed_session(owner, *, lease_left: float) -> ChatSession:
    session = make_session(owner, exchanges=1)
    ChatSession.objects.filter(pk=session.pk).update(
        generation_id="dead",
        generation_kind="prompt",
        generation_channel="generation.dead!",
        generation_started_at=timezone.now() - timedelta(minutes=1),
        generation_lease_until=timezone.now() + timedelta(seconds=lease_left),
    )
    session.refresh_from_db()
    return session


def test_an_expired_claim_shows_as_interrupted_not_generating(client, owner):
    session = crashed_session(owner, lease_left=-1)
    client.force_login(owner)
    html = client.get(session.get_absolute_url()).content.decode()
    assert "The last generation was interrupted" in html
    assert "Generating…" not in html and ">Cancel</button>" not in html


def test_a_live_claim_shows_generating_with_cancel(client, owner):
    session = crashed_session(owner, lease_left=30)
    client.force_login(owner)
    html = client.get(session.get_absolute_url()).content.decode()
    assert "Generating…" in html and ">Cancel</button>" in html


def test_starting_a_single_process_server_expires_every_old_claim(owner):
    session = crashed_session(owner, lease_left=30)
    call_command("recover_generations")
    session.refresh_from_db()
    assert session.was_interrupted and not session.is_generating


@pytest.mark.asyncio
async def test_an_interrupted_session_accepts_a_new_prompt_and_records_the_interruption(
    owner, fake_anthropic, open_tab
):
    session = await db_async(crashed_session)(owner, lease_left=-1)
    _, tab = await open_tab(owner, session)
    await tab.until("interrupted")
    await tab.send(message="are you there?")
    await tab.until("Hello from the fake model.")
    await generation.wait_idle()
    kinds = await db_async(
        lambda: list(Entry.objects.filter(session=session).values_list("kind", "custom_type"))
    )()
    assert kinds[-3:] == [("custom", "interrupted"), ("message", ""), ("message", "")]
    refreshed = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert not refreshed.generation_id


# --- a claim a dead process left, noticed by the process that is alive (issue 18, item 5) ---
def left_streaming(owner, *, lease_left: float) -> ChatSession:
    """A process died while streaming a reply, and no `recover_generations` ran since."""
    session = crashed_session(owner, lease_left=lease_left)
    ChatSession.objects.filter(pk=session.pk).update(
        partial_text="Half of the answer", partial_model=FAKE_MODEL
    )
    return session


@pytest.mark.asyncio
async def test_the_reply_a_dead_process_was_streaming_shows_at_once_in_a_tab_opened_after(
    owner, open_tab
):
    session = await db_async(left_streaming)(owner, lease_left=-1)
    _, tab = await open_tab(owner, session)
    await tab.until("Half of the answer", timeout=5)
    refreshed = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert not refreshed.generation_id  # the claim is ended, not left to linger


@pytest.mark.asyncio
async def test_a_claim_that_runs_out_while_a_tab_is_open_shows_its_reply_without_a_message(
    owner, open_tab
):
    session = await db_async(left_streaming)(owner, lease_left=1.0)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    shown = await tab.until("Half of the answer", timeout=6)
    assert "Interrupted" in shown  # the kept reply says how it ended
    assert "A reply was interrupted: the server stopped while it was being generated." in shown


@pytest.mark.asyncio
async def test_a_claim_watched_through_a_database_outage_is_taken_over_once_it_answers(
    owner, open_tab, caplog
):
    from contextlib import ExitStack

    from django.db import OperationalError, connection

    def away(execute, sql, params, many, context):
        if '"generation_lease_until" FROM' in sql:  # the watch's look at the claim
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    session = await db_async(left_streaming)(owner, lease_left=1.0)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')  # the claim is watched from here: alive for 1 s
    outage = ExitStack()  # on the one database thread, where the watch reads the claim
    await db_async(lambda: outage.enter_context(connection.execute_wrapper(away)))()
    try:
        with caplog.at_level("WARNING", logger="foundation.database"):
            await asyncio.sleep(2.5)  # the lease runs out while the database is away
    finally:
        await db_async(outage.close)()
    assert any("the database did not answer" in line for line in caplog.messages)
    shown = await tab.until("Half of the answer", timeout=8)
    assert "A reply was interrupted: the server stopped while it was being generated." in shown


@pytest.mark.asyncio
async def test_a_prompt_queued_behind_a_dead_processs_claim_is_sent_when_its_lease_runs_out(
    owner, fake_anthropic, open_tab
):
    session = await db_async(left_streaming)(owner, lease_left=1.5)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    await tab.send(message="are you still there?")
    await tab.until("Queued")
    await tab.until("Hello from the fake model.", timeout=10)
    await generation.wait_idle()
    texts = await db_async(
        lambda: list(
            Entry.objects.filter(session=session)
            .order_by("id")
            .values_list("content__0__text", flat=True)
        )
    )()
    assert texts[-4:] == [
        "Half of the answer",
        "A reply was interrupted: the server stopped while it was being generated.",
        "are you still there?",
        "Hello from the fake model.",
    ]


# --- a claim lost while generating, and the reply a crash would lose ------------------------
def assistant_texts(session: ChatSession) -> list[tuple[str, str, str]]:
    return list(
        Entry.objects.filter(session=session, role="assistant")
        .order_by("id")
        .values_list("status", "error", "content__0__text")
    )


@pytest.mark.asyncio
async def test_a_generation_whose_claim_is_taken_over_stops_and_writes_nothing_more(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_GENERATION_LEASE = 0.6  # renewed every 0.2 s
    fake_anthropic.enqueue(Reply.held(["token0 ", "token1 "]))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="go")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    # Another process takes the session over (as after a long stall of this one).
    await db_async(ChatSession.objects.filter(pk=session.pk).update)(generation_id="other")
    html = await tab.until("This generation stopped")
    assert "This generation stopped: another server process took the session over." in html
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    assert await db_async(assistant_texts)(session) == [("complete", "", "answer 0")]


@pytest.mark.asyncio
async def test_failed_renewals_are_retried_and_a_claim_taken_over_ends_its_lease():
    outcomes = iter([OSError("database is locked"), OSError("gone"), {"a", "b"}, {"b"}, set()])
    asked: list[list[str]] = []

    async def renew(generation_ids: list[str]) -> set[str]:
        asked.append(sorted(generation_ids))
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    clock = VirtualClock()  # a loaded machine must not make the retries run out of time
    keeper = claims.Leases(renew, lambda: 0.3, clock=clock.now, sleep=clock.sleep)
    a, b = keeper.hold("a"), keeper.hold("b")
    assert await a == claims.LOST  # the fourth renewal found "a" held by someone else
    assert await b == claims.LOST
    assert asked[0] == ["a", "b"]  # one renewal for every generation of the process


class VirtualClock:
    """Time that passes only when the code under test sleeps: no wall clock in the test."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def now(self) -> float:
        return self.seconds

    async def sleep(self, seconds: float) -> None:
        self.seconds += seconds
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_lease_that_cannot_be_renewed_in_time_ends_before_it_runs_out():
    async def renew(generation_ids: list[str]) -> set[str]:
        raise OSError("database is gone")

    clock = VirtualClock()
    keeper = claims.Leases(renew, lambda: 0.5, clock=clock.now, sleep=clock.sleep)
    async with asyncio.timeout(10):  # a guard against a keeper that never gives up
        lost = await keeper.hold("a")
    assert lost == (
        "the database did not take the renewal of its claim on the session in time (it answered "
        "“database is gone”); the reply so far is kept"
    )
    assert clock.now() < 0.5  # it gave up before the lease ran out: before another may claim it


async def saved_partial(session_id: int, text: str, timeout: float = 5) -> ChatSession:
    """The session row once its saved partial reply reads `text` (saves run in the background)."""
    async with asyncio.timeout(timeout):
        while (row := await db_async(ChatSession.objects.get)(pk=session_id)).partial_text != text:
            await asyncio.sleep(0.02)
    return row


@pytest.mark.asyncio
async def test_a_streaming_reply_is_saved_as_it_goes_and_cleared_when_it_ends(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_PARTIAL_SAVE_SECONDS = 0  # save at every delta
    fake_anthropic.enqueue(Reply.held(["token0 ", "token1 "], ["token2"]))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="go")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.until("token1 ")
    saved = await saved_partial(session.pk, "token0 token1 ")
    assert (saved.partial_text, saved.partial_model) == ("token0 token1 ", FAKE_MODEL)
    fake_anthropic.release()
    await tab.until("entry--assistant status--complete")
    await generation.wait_idle()
    assert (await db_async(ChatSession.objects.get)(pk=session.pk)).partial_text == ""


def test_taking_over_a_dead_claim_keeps_the_reply_it_was_streaming(owner):
    session = crashed_session(owner, lease_left=-1)
    ChatSession.objects.filter(pk=session.pk).update(
        partial_text="Half of the answer", partial_model="claude-x"
    )
    assert claims.claim(session.pk, "new", "prompt", "channel")
    *_, kept, note = Entry.objects.filter(session=session).order_by("id")
    assert (kept.role, kept.text, kept.status, kept.error, kept.model) == (
        "assistant", "Half of the answer", "aborted", "interrupted", "claude-x",
    )  # fmt: skip
    assert (note.custom_type, ChatSession.objects.get(pk=session.pk).partial_text) == (
        "interrupted",
        "",
    )


def test_starting_a_single_process_server_keeps_the_replies_that_were_streaming(owner):
    session = crashed_session(owner, lease_left=10)
    ChatSession.objects.filter(pk=session.pk).update(partial_text="Interrupted here")
    call_command("recover_generations")
    assert Entry.objects.filter(session=session).order_by("id").last().text == "Interrupted here"
    page_state = ChatSession.objects.get(pk=session.pk)
    assert page_state.was_interrupted and page_state.partial_text == ""


def test_a_live_process_takes_back_its_own_claim_whose_job_died_at_once(owner):
    # Its lease still has time left: no other process could take it over yet.
    session = crashed_session(owner, lease_left=10)
    ChatSession.objects.filter(pk=session.pk).update(partial_text="Streamed before it died")
    assert not claims.take_back(session.pk, "another generation")  # only its own
    assert claims.take_back(session.pk, "dead")
    *_, kept, note = Entry.objects.filter(session=session).order_by("id")
    assert (kept.text, kept.status, note.custom_type) == (
        "Streamed before it died",
        "aborted",
        "interrupted",
    )
    assert ChatSession.objects.get(pk=session.pk).generation_id == ""


@pytest.mark.asyncio
async def test_a_job_that_dies_is_said_in_the_log_and_leaves_no_claim(
    owner, fake_anthropic, open_tab, caplog
):
    def broken(event):  # a fault in showing the job's last status line, after its turns
        if isinstance(event, StatusShown) and not event.line.generating:
            raise RuntimeError("a fault no handler catches")
        return render(event)

    fake_anthropic.enqueue(Reply.text("Answered."), Reply.text("Again."))
    session = await db_async(make_session)(owner, exchanges=1)
    await generation.submit(session, "Go", broken)
    await generation.wait_idle()
    assert "died" in caplog.text and "a fault no handler catches" in caplog.text
    assert "never retrieved" not in caplog.text
    state = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert state.generation_id == ""
    # The session goes on.
    _, tab = await open_tab(owner, session)
    await tab.send(message="Once more")
    await tab.until("Again.")
