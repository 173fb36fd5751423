"""Chatting over the session WebSocket: streaming, persistence, cancel, bad frames, access."""

from __future__ import annotations

import asyncio

import pytest

from sessions import generation, store
from sessions.models import ChatSession, Entry, PendingPrompt

from .conftest import db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def entries(session: ChatSession) -> list[Entry]:
    return await db_async(lambda: list(Entry.objects.filter(session=session).order_by("id")))()


async def test_a_prompt_streams_deltas_and_persists_the_reply(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Hello from the **fake** model"))
    session = await db_async(make_session)(owner)
    connected, tab = await open_tab(owner, session)
    assert connected
    await tab.send(message="Hi there")
    html = await tab.until("entry--assistant status--")
    assert 'id="live-text" hx-swap-oob="beforeend"' in html  # deltas
    assert "<strong>fake</strong>" in html  # the final message is rendered markdown
    await generation.wait_idle()
    user, reply = await entries(session)
    assert (user.role, user.text) == ("user", "Hi there")
    assert (reply.role, reply.text, reply.status) == (
        "assistant",
        "Hello from the **fake** model",
        "complete",
    )
    assert reply.parent_id == user.pk
    await db_async(session.refresh_from_db)()
    assert session.leaf_id == reply.pk
    assert session.context_tokens == 42 + 7
    assert not session.generation_id  # the claim is released
    sent = fake_anthropic.requests[-1]["json"]["messages"]
    assert sent == [{"role": "user", "content": [{"type": "text", "text": "Hi there"}]}]


async def test_a_prompts_opening_reaches_the_tab_in_one_frame_before_the_reply(
    owner, fake_anthropic, open_tab
):
    """The status line, the prompt's entry and the reply's card: one message to every tab."""
    fake_anthropic.enqueue(Reply.held([], ["Hello back"]))  # held before its first token
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Hi there")
    await tab.until("<p>Hi there</p>")
    opening = tab.received[-1]
    assert 'id="status"' in opening and "status-generating" in opening
    assert opening.index('id="status"') < opening.index("<p>Hi there</p>")
    assert opening.index("<p>Hi there</p>") < opening.index('<div id="live" class="live"')
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold, 5)
    fake_anthropic.release()
    await tab.until("Hello back")
    await tab.until_idle()


async def test_cancel_stops_the_reply_and_keeps_the_partial_text_as_aborted(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held_tokens(4, 396))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Tell me a long story")
    await tab.until("token3 ")  # and the stream is held there
    await tab.send(action="cancel")
    html = await tab.until("Cancelled")
    assert "status--aborted" in html
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    reply = (await entries(session))[-1]
    assert reply.status == Entry.Status.ABORTED
    assert reply.text.startswith("token0 token1 token2 token3")
    assert "token399" not in reply.text


async def test_a_prompt_sent_while_a_reply_streams_is_queued_and_sent_after_it(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.held_tokens(2, 28), Reply.text("second answer"))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    await tab.until("token1 ")  # the first reply is held mid-stream
    await tab.send(message="second")
    await tab.until("Queued")
    assert len(fake_anthropic.requests) == 1  # nothing sent while the reply runs
    fake_anthropic.release()
    await tab.until("second answer")
    await generation.wait_idle()
    texts = [e.text for e in await entries(session)]
    assert texts[0] == "first" and texts[2] == "second" and texts[3] == "second answer"
    # The follow-up went out after the first reply, with it in the context.
    assert len(fake_anthropic.requests) == 2
    assert [m["role"] for m in fake_anthropic.requests[1]["json"]["messages"]] == [
        "user",
        "assistant",
        "user",
    ]
    assert await db_async(PendingPrompt.objects.count)() == 0


async def test_a_model_error_is_shown_and_recorded(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply(mode="status", status=429, error_type="rate_limit_error"))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="hello")
    html = await tab.until("Failed:")
    assert "rate limited" in html
    await generation.wait_idle()
    reply = (await entries(session))[-1]
    assert reply.status == Entry.Status.FAILED and "rate limited" in reply.error


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("not json at all", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"action": "explode"}', "Select a valid choice"),
        ('{"message": {"nested": 1}}', "fields must be strings"),
        ('{"message": "   "}', "Type a message first"),
    ],
)
async def test_a_malformed_frame_gets_an_error_and_the_socket_stays_usable(
    owner, fake_anthropic, open_tab, frame, reason
):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.ws.send_to(text_data=frame)
    html = await tab.until("notice--error")
    assert reason in html
    await tab.send(message="still here?")
    await tab.until("Hello from the fake model.")


async def test_an_oversized_message_is_refused_and_given_back(owner, open_tab, settings):
    settings.AGENTWEB_MAX_MESSAGE_CHARS = 50
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    text = "x" * 60
    await tab.send(message=text)
    html = await tab.until("Message too long")
    assert 'id="message"' in html and text in html  # back in the message box
    assert await entries(session) == []


async def test_an_unknown_command_gets_a_message_not_a_model_call(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/frobnicate now")
    html = await tab.until("Unknown command /frobnicate")
    assert "/frobnicate now" in html  # given back to edit
    assert fake_anthropic.requests == []
    assert await entries(session) == []


async def test_a_path_is_a_prompt_not_a_command(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/etc/hosts is broken")
    await tab.until("Hello from the fake model.")
    assert (await entries(session))[0].text == "/etc/hosts is broken"


async def test_another_users_session_is_refused(owner, other_user, open_tab):
    session = await db_async(make_session)(owner)
    connected, _ = await open_tab(other_user, session)
    assert not connected


async def test_a_signed_out_visitor_is_refused():
    from channels.testing import WebsocketCommunicator

    from agentweb.asgi import application

    communicator = WebsocketCommunicator(
        application,
        "/ws/sessions/1/",
        headers=[(b"origin", b"http://localhost"), (b"host", b"localhost")],
    )
    connected, code = await communicator.connect()
    assert (connected, code) == (False, 4401)  # refused as signed out, not for its origin


async def test_the_offline_model_answers_without_a_network(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.send(message="Please look at src/app.py")
    html = await tab.until("entry--assistant status--")
    assert "offline model" in html
    assert "src/app.py" in html
    await generation.wait_idle()
    branch = await db_async(store.get_branch)(session)
    assert branch[-1].model == "local"


async def test_a_deeply_nested_frame_gets_an_error_and_the_socket_stays_usable(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')
    await tab.ws.send_to(text_data="[" * 100_000 + "]" * 100_000)
    assert "Malformed message: nested too deeply." in await tab.until("Malformed")
    await tab.send(message="still here?")
    await tab.until("still here?")


async def test_a_message_with_characters_no_database_stores_is_kept_readable(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.ws.send_to(text_data='{"message": "nul \\u0000 and half \\ud800 a pair"}')
    await tab.until("entry--assistant status--")
    await generation.wait_idle()
    user = await db_async(lambda: Entry.objects.filter(session=session, role="user").get())()
    assert user.text == "nul \ufffd and half \ufffd a pair"


async def test_the_context_a_job_leaves_for_the_next_is_the_one_the_branch_gives(
    owner, fake_anthropic, open_tab
):
    """Each job leaves its context for the next (long sessions skip a reload); it must be
    exactly what a fresh build from the branch gives, after replies of every outcome."""
    from sessions.agent.session import CONTEXTS

    fake_anthropic.enqueue(
        Reply.text("A full answer."),
        Reply(mode="error_event", error_type="overloaded_error"),
        Reply.held(["Half "]),
        Reply.text("Last one."),
    )
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    for message, ending in (
        ("one", "A full answer."),
        ("two", "Failed:"),
        ("three", None),
        ("four", "Last one."),
    ):
        await tab.send(message=message)
        if ending is None:  # cancelled mid-stream
            assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
            await tab.until("Half ")
            await tab.send(action="cancel")
            await tab.until("Cancelled")
        else:
            await tab.until(ending)
        await generation.wait_idle()
        leaf, kept = CONTEXTS[session.pk]
        fresh = await db_async(store.session_context)(session)
        assert (leaf, kept) == ((await db_async(store.get_branch)(session))[-1].pk, fresh), message
