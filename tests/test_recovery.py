"""No stuck state: a generation whose process died shows as interrupted; the session goes on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from sessions import runtime
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session

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
    await runtime.wait_idle()
    kinds = await db_async(
        lambda: list(Entry.objects.filter(session=session).values_list("kind", "custom_type"))
    )()
    assert kinds[-3:] == [("custom", "interrupted"), ("message", ""), ("message", "")]
    refreshed = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert not refreshed.generation_id
