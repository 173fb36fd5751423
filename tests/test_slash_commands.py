"""The slash commands that do what the page's buttons do (issue 11, item 7): /model, /new,
/rename, /export, /thinking and /tree, from the message box, with plain refusals."""

from __future__ import annotations

import re

import pytest

from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def fresh(session: ChatSession) -> ChatSession:
    return await db_async(ChatSession.objects.get)(pk=session.pk)


async def test_slash_model_names_the_models_then_changes_to_one(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/model")
    html = await tab.until("notice")
    assert (
        "Model: claude-fake-test. Change it with /model and one of: local, claude-fake-test" in html
    )
    await tab.send(message="/model local")
    html = await tab.until("Model changed to")
    assert "Model changed to <code>local</code>" in html
    assert (await fresh(session)).model == "local"


async def test_an_unknown_model_is_refused_and_the_text_comes_back(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/model gpt-9")
    html = await tab.until("notice--error")
    assert "Unknown model “gpt-9”: choose one of local, claude-fake-test" in html
    assert "/model gpt-9</textarea>" in html
    count = await db_async(Entry.objects.filter(session=session).count)()
    assert count == 0


async def test_slash_rename_retitles_the_session_in_every_tab(owner, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    _, other = await open_tab(owner, session)
    await tab.send(message="/rename   Parser port, part two  ")
    html = await other.until('id="session-title"')
    assert ">Parser port, part two<" in html
    assert (await fresh(session)).title == "Parser port, part two"
    await tab.send(message="/rename")
    assert "This field is required." in await tab.until("notice--error")


async def test_slash_new_opens_a_new_session(owner, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/new")
    html = await tab.until("data-url=")
    newest = await db_async(lambda: ChatSession.objects.order_by("-pk").first())()
    assert newest.pk != session.pk and newest.owner_id == owner.pk
    assert f'data-url="/sessions/{newest.pk}/"' in html


async def test_slash_export_downloads_the_session_in_either_format(owner, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/export")
    assert f'data-url="/sessions/{session.pk}/export.md"' in await tab.until("data-url=")
    await tab.send(message="/export jsonl")
    assert f'data-url="/sessions/{session.pk}/export.jsonl"' in await tab.until("data-url=")
    await tab.send(message="/export pdf")
    assert "Export as md or jsonl, not “pdf”." in await tab.until("notice--error")


async def test_slash_tree_opens_the_tree_view(owner, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/tree")
    assert f'data-url="/sessions/{session.pk}/tree/"' in await tab.until("data-url=")


async def test_the_slash_menu_offers_every_command(owner, client):
    session = await db_async(make_session)(owner)
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(session.get_absolute_url())).content.decode()
    names = re.findall(r'data-name="([a-z]+)"', page)
    assert names == [
        "handoff",
        "compact",
        "thinking",
        "model",
        "rename",
        "instructions",
        "new",
        "export",
        "tree",
        "help",
    ]


async def test_every_registered_command_has_a_handler_and_every_handler_a_command():
    """One table of the commands a tab runs: a command registered without a handler fails here
    (it would otherwise reach the model as a prompt, as `/undo` once did)."""
    from sessions import commands
    from sessions.consumers import COMMANDS, SessionConsumer

    assert set(COMMANDS) == set(commands.REGISTRY)
    assert all(callable(getattr(SessionConsumer, name, None)) for name in COMMANDS.values())


async def test_an_unknown_command_is_refused_in_words_and_given_back(owner, open_tab):
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/undo the last step")
    html = await tab.until("notice--error")
    assert "Unknown command /undo. Type / to see the commands." in html
    assert "/undo the last step</textarea>" in html
    assert not await db_async(Entry.objects.filter(session=session).exists)()
