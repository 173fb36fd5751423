"""What the model's API can do wrong, through the fake server and the real SDK: each ends in a
clear message, the session intact, the text already streamed kept (as failed), and the next
prompt works."""

from __future__ import annotations

import asyncio

import pytest

from sessions import generation
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

FAULTS = [
    ("429", Reply(mode="status", status=429, error_type="rate_limit_error"),
     "Failed: rate limited by the API, try again shortly (429)", ""),
    ("529", Reply(mode="status", status=529, error_type="overloaded_error"),
     "Failed: the model is overloaded, try again shortly (529)", ""),
    ("500", Reply(mode="status", status=500, error_type="api_error"),
     "Failed: API error 500: fake api_error", ""),
    ("error event", Reply(mode="error_event", error_type="overloaded_error"),
     "Failed: the model is overloaded, try again shortly", "Hello from"),
    ("dropped connection", Reply(mode="drop"),
     "Failed: network connection lost", "Hello from"),
    ("no message_stop", Reply(mode="no_stop"),
     "Failed: network connection lost: the stream ended before the reply did",
     "Hello from the fake model."),
    ("stall", Reply.held(["Half an ", "answer"]),
     "Failed: the model sent nothing for 0.5 s: timed out", "Half an answer"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reply", "message", "kept"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS]
)
async def test_a_model_fault_ends_clearly_keeps_the_partial_text_and_the_next_prompt_works(
    owner, fake_anthropic, open_tab, settings, reply, message, kept
):
    settings.AGENTWEB_STALL_SECONDS = 0.5
    fake_anthropic.enqueue(reply, Reply.text("Back to normal."))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    html = await tab.until("Failed:", timeout=15)
    assert message in html
    await generation.wait_idle()
    failed = await db_async(
        lambda: Entry.objects.filter(session=session, role="assistant").last()
    )()
    assert (failed.status, failed.text) == ("failed", kept)
    await tab.send(message="second")
    await tab.until("Back to normal.")
    await generation.wait_idle()
    texts = await db_async(lambda: list(Entry.objects.filter(session=session).values_list("content__0__text", flat=True)))()  # fmt: skip
    assert texts[:2] == ["question 0", "answer 0"] and texts[-2:] == ["second", "Back to normal."]
    refreshed = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert not refreshed.generation_id and refreshed.partial_text == ""
    fake_anthropic.release()


async def test_a_reply_slower_than_the_stall_timeout_in_all_but_never_silent_for_it_streams_whole(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_STALL_SECONDS = 0.5
    fake_anthropic.enqueue(Reply.text("one two three four five six seven eight", delay=0.2))
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="take your time")
    # the whole reply shown (the tab's catch-up shows the earlier reply, complete, at once)
    await tab.until("one two three four five six seven eight", timeout=15)
    await generation.wait_idle()
    reply = await db_async(lambda: Entry.objects.filter(session=session).last())()
    assert (reply.status, reply.text) == ("complete", "one two three four five six seven eight")


async def test_a_429_that_says_when_to_retry_is_retried_by_the_sdk(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_MAX_RETRIES = 1
    fake_anthropic.enqueue(
        Reply(
            mode="status", status=429, error_type="rate_limit_error", headers={"retry-after": "1"}
        ),
        Reply.text("Worth the wait."),
    )
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    started = asyncio.get_running_loop().time()
    await tab.send(message="please")
    await tab.until("Worth the wait.")
    assert asyncio.get_running_loop().time() - started >= 1  # it waited as told
    assert len(fake_anthropic.requests) == 2
