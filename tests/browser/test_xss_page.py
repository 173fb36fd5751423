"""The script-injection corpus in Chromium: every payload calls alert, and no dialog may open on
the session list, a session (stored and streamed), an imported file, side by side or the
review box."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions import handoff
from sessions.models import ChatSession, Preferences

from ..conftest import make_session
from ..test_xss import gallery, imported
from ..xss import PAYLOADS
from .conftest import offline_server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def server_url(django_db_setup: Any, browser_available: None) -> Iterator[str]:
    """The offline model at a quick pace: the replies and the document that quote the payloads
    stream token by token in seconds, not half a minute."""
    yield from offline_server("daphne-xss", token_delay="0.001")


@pytest.fixture
def dialogs(signed_in):
    opened: list[str] = []
    signed_in.on("dialog", lambda dialog: (opened.append(dialog.message), dialog.dismiss()))
    return opened


def visit(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    for details in page.locator("details").all()[:200]:  # open what is folded: ontoggle, lazy parts
        details.evaluate("d => d.open = true")
    page.wait_for_timeout(200)  # let onerror/onload/onfocus handlers of any injected element run


def test_no_payload_runs_anywhere_text_is_shown(signed_in, server_url, dialogs):
    page = signed_in
    walker = User.objects.get(username="walker")
    stored = gallery(walker)
    for payload in PAYLOADS[:20]:
        ChatSession.objects.filter(pk=make_session(walker, model="local").pk).update(title=payload)
    old = imported(walker)
    reply = old.append_message(
        "assistant",
        [{"type": "text", "text": "\n".join(PAYLOADS)}],
        data={"purpose": "handoff"},
    )
    new = handoff.new_session(old, from_entry=reply, content="\n".join(PAYLOADS), data={"warnings": PAYLOADS[:5]})  # fmt: skip

    visit(page, f"{server_url}/")
    visit(page, f"{server_url}{stored.get_absolute_url()}")
    visit(page, f"{server_url}{old.get_absolute_url()}")
    visit(page, f"{server_url}/sessions/{old.pk}/compare/{new.pk}/")
    assert dialogs == []

    # Streamed: the offline model quotes what it is sent, token by token, then as markdown.
    chat = make_session(walker, model="local")
    visit(page, f"{server_url}{chat.get_absolute_url()}")
    for sent, payload in enumerate((PAYLOADS[0], PAYLOADS[1], PAYLOADS[6], PAYLOADS[48]), 1):
        page.get_by_label("Message").fill(f"Show me what this one renders as: {payload}")
        page.get_by_label("Message").press("Enter")
        expect(page.locator(".entry--assistant")).to_have_count(sent, timeout=30_000)
        expect(page.locator(".entry--assistant").last).to_contain_text("You wrote")
        expect(page.get_by_role("button", name="Cancel")).to_have_count(0, timeout=30_000)
    page.wait_for_timeout(200)
    assert dialogs == []

    # The review box holds the document as the user will edit it: the goal quotes a payload.
    Preferences.objects.create(user=walker, review_handoff=True)
    page.get_by_label("Message").fill("/handoff")
    page.get_by_label("Message").press("Enter")
    expect(page.get_by_label("Handoff document")).to_have_value(re.compile("alert"), timeout=60_000)
    page.wait_for_timeout(200)
    assert dialogs == []
