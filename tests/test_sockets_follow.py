"""Sockets follow the account and the session (issue 18, item 3): a password change, a sign-out
or the end of a sign-in closes that sign-in's sockets as Django's session rules end its pages;
each frame is checked before it is acted on; deleting a session closes its tabs and stops its
generation, and a handoff never continues a deleted chain."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from channels.layers import get_channel_layer
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from sessions import generation
from sessions.models import ChatSession, Entry, PendingPrompt

from .conftest import SIX_SECTIONS, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

CLOSED_SIGNED_OUT = {"type": "websocket.close", "code": 4401}
CLOSED_NOT_FOUND = {"type": "websocket.close", "code": 4404}


def client_of(cookie: str) -> Client:
    client = Client()
    client.cookies["sessionid"] = cookie
    return client


async def entry_count(session: ChatSession) -> int:
    return await db_async(Entry.objects.filter(session=session).count)()


async def open_caught_up(open_tab, owner, session):
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')  # the catch-up ends with the status line
    return tab


async def test_a_password_change_closes_the_other_sign_ins_sockets_and_keeps_its_own(
    owner, open_tab
):
    session = await db_async(make_session)(owner, exchanges=1)
    here, elsewhere = [await open_caught_up(open_tab, owner, session) for _ in range(2)]

    def change_password() -> int:
        return (
            client_of(here.cookie)
            .post(
                "/accounts/password_change/",
                {
                    "old_password": "owner-pass-123",
                    "new_password1": "a-new-pass-456",
                    "new_password2": "a-new-pass-456",
                },
            )
            .status_code
        )

    assert await db_async(change_password)() == 302
    assert await elsewhere.ws.receive_output(timeout=3) == CLOSED_SIGNED_OUT
    await here.send(message="/help")  # the sign-in that changed it goes on
    await here.until("<dd>List the slash commands</dd>")


async def held_once(open_tab, owner, session):
    """A tab whose sign-in has held for one frame already (the check remembers it)."""
    tab = await open_caught_up(open_tab, owner, session)
    await tab.send(message="/help")
    await tab.until("<dd>List the slash commands</dd>")
    return tab


@pytest.mark.parametrize("held", [False, True], ids=["its first frame", "after one held"])
async def test_a_password_changed_elsewhere_refuses_the_next_frame_and_stores_nothing(
    owner, open_tab, held
):
    """As `manage.py changepassword` or the admin does it: no page of agentweb is involved."""
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await (held_once if held else open_caught_up)(open_tab, owner, session)

    def change_password() -> None:
        owner.set_password("changed-by-an-admin-789")
        owner.save()

    await db_async(change_password)()
    await tab.send(message="Still there?")
    assert await tab.ws.receive_output(timeout=3) == CLOSED_SIGNED_OUT
    assert await entry_count(session) == 2
    assert not await db_async(PendingPrompt.objects.exists)()


def clear_sign_ins() -> None:  # as an admin or `clearsessions` does
    Session.objects.all().delete()


def expire_sign_ins() -> None:  # as time does
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("end", [clear_sign_ins, expire_sign_ins], ids=["cleared", "expired"])
async def test_an_ended_sign_in_refuses_the_next_frame(owner, open_tab, end):
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await held_once(open_tab, owner, session)
    await db_async(end)()
    await tab.send(message="/rename A new name")
    assert await tab.ws.receive_output(timeout=3) == CLOSED_SIGNED_OUT
    assert (await db_async(ChatSession.objects.get)(pk=session.pk)).title == "question 0"


async def test_a_user_deactivated_after_a_frame_held_is_refused_the_next_frame(owner, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await held_once(open_tab, owner, session)
    await db_async(lambda: type(owner).objects.filter(pk=owner.pk).update(is_active=False))()
    await tab.send(message="Still there?")
    assert await tab.ws.receive_output(timeout=3) == CLOSED_SIGNED_OUT
    assert await entry_count(session) == 2


async def test_deleting_a_session_closes_its_tabs_and_says_why(owner, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await open_caught_up(open_tab, owner, session)
    response = await db_async(
        lambda: client_of(tab.cookie).post(f"/sessions/{session.pk}/delete/")
    )()
    assert response.status_code == 302
    said = await tab.receive(timeout=3)
    assert "This session was deleted: restore it from the session list to go on with it." in said
    assert await tab.ws.receive_output(timeout=3) == CLOSED_NOT_FOUND


async def test_a_tab_whose_session_is_purged_before_it_catches_up_is_closed_not_crashed(
    owner, open_tab
):
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await open_caught_up(open_tab, owner, session)
    await db_async(ChatSession.objects.filter(pk=session.pk).delete)()  # purged: no row at all
    await get_channel_layer().group_send(f"session.{session.pk}", {"type": "session.resync"})
    assert "This session was deleted" in await tab.receive(timeout=3)
    assert await tab.ws.receive_output(timeout=3) == CLOSED_NOT_FOUND


@pytest.mark.parametrize("typed", ["a prompt for the deleted session", "/rename Renamed", "/new"])
async def test_a_frame_for_a_deleted_session_is_refused_and_changes_nothing(owner, open_tab, typed):
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await open_caught_up(open_tab, owner, session)
    await db_async(session.soft_delete)()  # deleted in another process: no event reached it
    await tab.send(message=typed)
    assert "This session was deleted" in await tab.receive(timeout=3)
    assert await tab.ws.receive_output(timeout=3) == CLOSED_NOT_FOUND
    assert await entry_count(session) == 2
    assert await db_async(ChatSession.objects.count)() == 1
    assert (await db_async(ChatSession.objects.get)(pk=session.pk)).title == "question 0"


async def test_deleting_a_session_stops_its_reply(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held_tokens(3, 300))
    session = await db_async(make_session)(owner, exchanges=1)
    tab = await open_caught_up(open_tab, owner, session)
    await tab.send(message="Write a long story")
    await tab.until("token2 ")  # held there
    await db_async(lambda: client_of(tab.cookie).post(f"/sessions/{session.pk}/delete/"))()
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    reply = await db_async(lambda: Entry.objects.filter(session=session).last())()
    assert reply.status == Entry.Status.ABORTED and "token299" not in reply.text


async def test_a_handoff_never_makes_a_part_of_a_deleted_chain(owner, fake_anthropic, open_tab):
    """Deleted where no cancel reaches the job (another process's delete, a lost message): the
    switch itself refuses."""
    document = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)
    fake_anthropic.enqueue(Reply.held(["## Goal\n"], [document]))
    session = await db_async(make_session)(owner, exchanges=2)
    tab = await open_caught_up(open_tab, owner, session)
    await tab.send(message="/handoff")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold, 5)
    await db_async(session.soft_delete)(whole_chain=True)
    fake_anthropic.release()
    await tab.until("The session was deleted while its handoff ran: no new session was made.")
    await generation.wait_idle()
    assert await db_async(ChatSession.objects.count)() == 1
