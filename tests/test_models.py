"""Which model a session runs on: only models this server offers, a picker, and plain words."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from sessions import session_file, store
from sessions.generation import claims
from sessions.models import ChatSession, Entry
from sessions.partials import announce

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.django_db(transaction=True)]

IMPORTED = [
    {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"},
    {"type": "message", "id": "u1", "parentId": None, "timestamp": "2025-01-01T00:00:01Z", "message": {"role": "user", "content": "Port the parser to Rust."}},
    {"type": "message", "id": "a1", "parentId": "u1", "timestamp": "2025-01-01T00:00:02Z", "message": {"role": "assistant", "content": [{"type": "text", "text": "Started in src/parser.rs."}], "provider": "anthropic", "model": "claude-opus-4-1", "stopReason": "stop"}},
]  # fmt: skip


@pytest.fixture
def no_key(settings):
    settings.ANTHROPIC_API_KEY = ""
    settings.AGENTWEB_MODEL = "claude-sonnet-4-5"  # asked for, but not runnable without a key


def imported(owner) -> ChatSession:
    return session_file.import_jsonl(owner, [json.dumps(line) for line in IMPORTED])


def test_an_imported_session_shows_its_files_model_and_runs_on_the_servers_default(
    client, owner, no_key
):
    session = imported(owner)
    assert (session.model, session.imported_model) == ("local", "anthropic/claude-opus-4-1")
    client.force_login(owner)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "Imported from a session that ran on <code>anthropic/claude-opus-4-1</code>" in page
    assert '<option value="local" selected>Offline model (local)</option>' in page


def test_without_a_key_only_the_offline_model_is_offered(client, owner, no_key):
    client.force_login(owner)
    page = client.get(make_session(owner, model="local").get_absolute_url()).content.decode()
    assert '<option value="local" selected>Offline model (local)</option>' in page
    assert "claude-sonnet-4-5" not in page and "Claude Sonnet" not in page


def test_with_a_key_the_configured_claude_models_are_offered(client, owner, settings):
    settings.ANTHROPIC_API_KEY = "k"
    settings.AGENTWEB_CLAUDE_MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5"]
    client.force_login(owner)
    page = client.get(make_session(owner, model="local").get_absolute_url()).content.decode()
    assert '<option value="claude-sonnet-4-5">Claude Sonnet 4.5</option>' in page
    assert '<option value="claude-haiku-4-5">Claude Haiku 4.5</option>' in page
    assert "Claude Opus" not in page


def test_picking_a_model_records_a_model_change_that_is_exported_as_one(client, owner, settings):
    settings.ANTHROPIC_API_KEY = "k"
    session = make_session(owner, model="local", exchanges=1)
    client.force_login(owner)
    response = client.post(reverse("chat:model", args=[session.pk]), {"model": "claude-opus-4-1"})
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.model == "claude-opus-4-1"
    change = store.get_branch(session)[-1]
    assert (change.kind, change.data["fields"]) == (
        "model_change",
        {"provider": "anthropic", "modelId": "claude-opus-4-1"},
    )
    exported = [json.loads(line) for line in session_file.export_jsonl(session)]
    last = exported[-1]
    assert (last["type"], last["provider"], last["modelId"]) == (
        "model_change",
        "anthropic",
        "claude-opus-4-1",
    )
    page = client.get(session.get_absolute_url()).content.decode()
    assert "Model changed to <code>claude-opus-4-1</code> (anthropic)" in page


def test_a_model_the_server_does_not_offer_cannot_be_picked(client, owner, no_key):
    session = make_session(owner, model="local", exchanges=1)
    client.force_login(owner)
    response = client.post(
        reverse("chat:model", args=[session.pk]),
        {"model": "claude-opus-4-1"},
        headers={"HX-Request": "true"},
    )
    assert "That model is not offered on this server." in response.content.decode()
    session.refresh_from_db()
    assert session.model == "local"
    assert not Entry.objects.filter(session=session, kind="model_change").exists()


def test_another_users_session_model_cannot_be_changed(client, owner, other_user):
    theirs = make_session(other_user, model="local")
    client.force_login(owner)
    assert (
        client.post(reverse("chat:model", args=[theirs.pk]), {"model": "local"}).status_code == 404
    )


def test_the_model_cannot_change_while_a_reply_is_generated(client, owner, settings):
    session = make_session(owner, model="local", exchanges=1)
    assert claims.claim(session.pk, "gen-1", "prompt", "channel")
    client.force_login(owner)
    client.post(reverse("chat:model", args=[session.pk]), {"model": "local"})
    settings.ANTHROPIC_API_KEY = "k"
    response = client.post(reverse("chat:model", args=[session.pk]), {"model": "claude-opus-4-1"}, follow=True)  # fmt: skip
    assert (
        "Wait for the reply to end (or cancel it) to change the model." in response.content.decode()
    )
    session.refresh_from_db()
    assert session.model == "local"


@pytest.mark.asyncio
async def test_an_imported_session_with_no_key_hands_off_on_the_offline_model(
    owner, open_tab, no_key
):
    session = await db_async(imported)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    html = await tab.until("data-url=")
    assert "New session started with handoff context" in html
    assert "Handoff failed" not in html and "TypeError" not in html


@pytest.mark.asyncio
async def test_a_session_on_a_model_no_longer_offered_fails_in_plain_words(owner, open_tab, no_key):
    session = await db_async(make_session)(owner, model="claude-opus-4-1", exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    html = await tab.until("Handoff failed")
    assert (
        "Handoff failed: Claude Opus 4.1 needs an Anthropic API key, and this server has none "
        "(ANTHROPIC_API_KEY is not set). Choose another model for this session."
    ) in html
    assert "TypeError" not in html and "authentication method" not in html


@pytest.mark.asyncio
async def test_another_tab_sees_the_model_change(owner, open_tab, fake_anthropic, settings):
    fake_anthropic.enqueue(Reply.text("Hi."))
    session = await db_async(make_session)(owner, model="local", exchanges=1)
    last = (await db_async(store.get_branch)(session))[-1]
    _, tab = await open_tab(owner, session, after=last.pk)
    await tab.until('id="status"')
    entry = await db_async(session.change_model)(FAKE_MODEL)
    await db_async(announce.entry)(session.pk, entry)
    html = await tab.until("Model changed to")
    assert f"Model changed to <code>{FAKE_MODEL}</code> (anthropic)" in html
    assert f'<option value="{FAKE_MODEL}" selected>' in html
