"""Generated titles (issue 11, item 3): with Claude and the preference on, a cheap model call
after the first reply writes a short title; it never holds the chat up, a rename wins over it,
Cancel stops it, and without the preference (or offline) the title is the first message, cut."""

from __future__ import annotations

import asyncio

import pytest
from django.urls import reverse

from sessions import generation, titles
from sessions.models import ChatSession, Preferences

from .conftest import database_away, db_async, make_session
from .fake_anthropic import Reply

QUESTION = (
    "How do I read a TOML config file in Python 3.11 without installing anything from PyPI first?"
)


CUT = "How do I read a TOML config file in Python 3.11 without installing anything…"


def title_of(session: ChatSession) -> str:
    return ChatSession.objects.get(pk=session.pk).title


def prefer_titles(owner, on: bool = True) -> None:
    Preferences.objects.update_or_create(user=owner, defaults={"generate_titles": on})


async def first_exchange(owner, fake_anthropic, open_tab, *then: Reply):
    """A session of an owner who prefers generated titles, its first question answered ("Use
    tomllib."), the replies `then` queued after it; the session and its tab."""
    await db_async(prefer_titles)(owner)
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Use tomllib."), *then)
    _, tab = await open_tab(owner, session)
    await tab.send(message=QUESTION)
    await tab.until("Use tomllib.</p>")
    return session, tab


@pytest.fixture
def title_model(settings):
    settings.AGENTWEB_TITLE_MODEL = "claude-cheap-test"
    return "claude-cheap-test"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_first_reply_is_followed_by_a_generated_title(
    owner, fake_anthropic, open_tab, title_model
):
    session, tab = await first_exchange(
        owner, fake_anthropic, open_tab, Reply.text('"Reading TOML with tomllib."')
    )
    await tab.until("Reading TOML with tomllib</h1>")
    shown = "".join(tab.received)
    assert shown.index("without installing anything…</h1>") < shown.index("tomllib</h1>")
    # Every tab's sidebar lists it by its new title, without a reload.
    await tab.until('<div id="sidebar-items" hx-swap-oob="true">')
    assert ">Reading TOML with tomllib</a>" in "".join(tab.received)
    await generation.wait_idle()
    assert await db_async(title_of)(session) == "Reading TOML with tomllib"
    reply, title = (request["json"] for request in fake_anthropic.requests)
    assert reply["model"] != "claude-cheap-test"
    assert title["model"] == "claude-cheap-test"
    assert title["max_tokens"] == 30
    asked = title["messages"][0]["content"]
    assert asked.startswith("Write a title of at most six words for the conversation below")
    assert f"User: {QUESTION}\n\nAssistant: Use tomllib." in asked


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_only_the_first_reply_asks_for_a_title(owner, fake_anthropic, open_tab, title_model):
    await db_async(prefer_titles)(owner)
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("One."), Reply.text("Counting"), Reply.text("Two."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Count with me")
    await tab.until("Counting</h1>")
    await generation.wait_idle()
    await tab.send(message="Go on")
    await tab.until("Two.</p>")
    await generation.wait_idle()
    assert [r["json"]["model"] for r in fake_anthropic.requests].count("claude-cheap-test") == 1


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_without_the_preference_no_title_is_asked_for(
    owner, fake_anthropic, open_tab, title_model
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Use tomllib."))
    _, tab = await open_tab(owner, session)
    await tab.send(message=QUESTION)
    await tab.until("Use tomllib.</p>")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 1
    assert await db_async(title_of)(session) == CUT


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_offline_model_keeps_the_cut_title(owner, fake_anthropic, open_tab, title_model):
    await db_async(prefer_titles)(owner)
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.send(message=QUESTION)
    await tab.until("offline model")
    await generation.wait_idle()
    assert fake_anthropic.requests == []
    assert await db_async(title_of)(session) == CUT


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_chat_goes_on_while_the_title_is_written(
    owner, fake_anthropic, open_tab, title_model
):
    session, tab = await first_exchange(
        owner,
        fake_anthropic,
        open_tab,
        Reply.held(["TOML"], [" in Python"]),
        Reply.text("Yes, 3.11+."),
    )
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the title call is held
    await tab.send(message="Is it in the standard library?")
    await tab.until("Yes, 3.11+.</p>")
    assert await db_async(title_of)(session) != "TOML in Python"
    fake_anthropic.release()
    await tab.until("TOML in Python</h1>")
    await generation.wait_idle()
    assert await db_async(title_of)(session) == "TOML in Python"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_rename_while_the_title_is_written_wins(
    owner, fake_anthropic, open_tab, title_model, async_client
):
    session, tab = await first_exchange(
        owner, fake_anthropic, open_tab, Reply.held(["TOML"], [" in Python"])
    )
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await async_client.aforce_login(owner)
    await async_client.post(reverse("chat:rename", args=[session.pk]), {"title": "Config loading"})
    fake_anthropic.release()
    await generation.wait_idle()
    assert await db_async(title_of)(session) == "Config loading"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancel_stops_the_title_call(owner, fake_anthropic, open_tab, title_model):
    session, tab = await first_exchange(
        owner, fake_anthropic, open_tab, Reply.held(["TOML"], [" in Python"])
    )
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(action="cancel")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect)
    await generation.wait_idle()
    assert await db_async(title_of)(session) == CUT


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_failed_title_call_leaves_the_cut_title_and_says_nothing(
    owner, fake_anthropic, open_tab, title_model
):
    session, tab = await first_exchange(
        owner,
        fake_anthropic,
        open_tab,
        Reply(mode="status", status=529, error_type="overloaded_error"),
    )
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 2
    assert await db_async(title_of)(session) == CUT
    while not await tab.ws.receive_nothing(timeout=0.3):
        await tab.receive()
    assert "notice--error" not in "".join(tab.received)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_title_whose_save_meets_a_database_that_does_not_answer_is_given_up_quietly(
    owner, fake_anthropic, open_tab, title_model, caplog
):
    session, tab = await first_exchange(
        owner,
        fake_anthropic,
        open_tab,
        Reply.held(["TOML"], [" in Python"]),
        Reply.text("Still here."),
    )
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the title call is held
    saving_the_title = f'UPDATE "{ChatSession._meta.db_table}"'
    async with database_away(lambda sql: sql.startswith(saving_the_title) and '"title"' in sql):
        with caplog.at_level("INFO", logger="sessions.titles"):
            fake_anthropic.release()
            await generation.wait_idle()
    assert (
        f"no title for session {session.pk}: server closed the connection unexpectedly"
        in caplog.messages
    )
    assert await db_async(title_of)(session) == CUT
    await tab.send(message="Are you there?")
    await tab.until("Still here.</p>")
    assert "notice--error" not in "".join(tab.received)


def test_a_model_answer_becomes_a_clean_title():
    assert titles.clean('"Reading TOML with tomllib."') == "Reading TOML with tomllib"
    assert titles.clean("Title: **Async cancel in Django**\nMore text") == (
        "Async cancel in Django"
    )
    assert titles.clean("\n  « Migration des données »  ") == "Migration des données"
    assert titles.clean("数据库迁移计划。") == "数据库迁移计划"
    assert titles.clean("one two three four five six seven eight nine ten") == (
        "one two three four five six seven eight"
    )
    assert titles.clean("   ") == ""


@pytest.mark.django_db
def test_the_preference_is_on_the_preferences_page(client, owner):
    client.force_login(owner)
    page = client.get(reverse("chat:preferences")).content.decode()
    assert "Give new sessions a short title written by Claude" in page
    client.post(reverse("chat:preferences"), {"generate_titles": "on"})
    assert Preferences.objects.get(user=owner).generate_titles is True


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_first_reply_that_called_tools_gets_a_title_too(
    owner, fake_anthropic, open_tab, title_model
):
    await db_async(prefer_titles)(owner)
    session = await db_async(make_session)(owner)
    plan = {"todos": [{"text": "Read the TOML file", "state": "pending"}]}
    fake_anthropic.enqueue(
        Reply.tool("todo_write", plan), Reply.text("Use tomllib."), Reply.text("TOML in Python")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message=QUESTION)
    await tab.until("TOML in Python</h1>")
    await generation.wait_idle()
    title_request = fake_anthropic.requests[-1]["json"]
    assert title_request["model"] == "claude-cheap-test"
    assert "tools" not in title_request
    assert "Assistant: Use tomllib." in title_request["messages"][0]["content"]


@pytest.mark.django_db
def test_whether_a_title_is_wanted_is_read_in_one_query_and_not_at_all_without_a_key(
    owner, settings, django_assert_num_queries
):
    session = make_session(owner, exchanges=1)
    settings.ANTHROPIC_API_KEY = ""
    with django_assert_num_queries(0):
        assert titles.wanted(session.pk) is None  # no title model to ask
    settings.ANTHROPIC_API_KEY = "sk-test"
    with django_assert_num_queries(1):
        assert titles.wanted(session.pk) is None  # its owner does not prefer them
    prefer_titles(owner)
    start = titles.wanted(session.pk)
    assert start is not None
    assert (start.question, start.answer, start.current) == ("question 0", "answer 0", "question 0")
