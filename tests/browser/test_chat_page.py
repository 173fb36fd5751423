"""A person chatting with the offline model in a real browser."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def a_new_sessions_message_box(page: Any) -> Any:
    """The message box of a session just started with the New session button."""
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    return page.get_by_label("Message")


def test_a_person_signs_in_starts_a_session_and_sees_the_streamed_reply_rendered(
    signed_in, server_url
):
    page = signed_in
    box = a_new_sessions_message_box(page)
    box.fill("Hello, please read `src/main.py`")
    box.press("Enter")
    expect(box).to_have_value("")
    streaming = page.locator(".entry--streaming")
    expect(streaming).to_be_visible()
    reply = page.locator("#transcript .entry--assistant.status--complete")
    expect(reply).to_contain_text("offline model", timeout=20_000)
    expect(reply.locator("code").first).to_be_visible()  # rendered markdown, not raw backticks
    expect(streaming).to_have_count(0)
    # It survives a reload: the transcript comes from the database.
    page.reload()
    expect(page.locator("#transcript .entry--user")).to_contain_text("Hello, please read")


def test_html_in_a_message_is_shown_as_text_and_runs_nothing(signed_in):
    page = signed_in
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="New session").click()
    attack = "<img src=x onerror=alert(1)>"
    page.get_by_label("Message").fill(attack)
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#transcript .entry--user")).to_contain_text(attack)
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_be_visible(
        timeout=20_000
    )
    assert page.locator("#transcript img").count() == 0
    page.reload()
    expect(page.locator("#transcript .entry--user")).to_contain_text(attack)
    assert page.locator("#transcript img").count() == 0
    assert dialogs == []


def test_shift_enter_makes_a_new_line_and_cancel_stops_a_reply(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(Reply.held(["A reply that "], ["never ends."]))
    sign_in(page, claude_url, django_user_model, "impatient")
    box = a_new_sessions_message_box(page)
    box.fill("line one")
    box.press("Shift+Enter")
    box.type("line two")
    expect(box).to_have_value("line one\nline two")
    box.press("Enter")
    expect(page.locator("#live-text")).to_have_text("A reply that ")  # held until cancelled
    cancel = page.get_by_role("button", name="Cancel")
    expect(cancel).to_be_visible()
    cancel.click()
    expect(page.locator("#transcript .entry--assistant.status--aborted")).to_contain_text(
        "Cancelled"
    )
    expect(cancel).to_have_count(0)


def test_typing_a_slash_shows_the_command_menu(signed_in):
    page = signed_in
    page.get_by_role("button", name="New session").click()
    page.get_by_label("Message").fill("/")
    menu = page.get_by_role("listbox", name="Commands")
    expect(menu).to_be_visible()
    expect(menu.get_by_role("option").first).to_contain_text(
        "/handoff [--model <id>] [focus instructions]"
    )
    page.get_by_label("Message").press("Tab")
    expect(page.get_by_label("Message")).to_have_value("/handoff ")
    expect(menu).to_be_hidden()


def test_a_long_session_loads_earlier_entries_on_demand(signed_in, server_url):
    from django.contrib.auth.models import User

    from ..conftest import make_session

    session = make_session(User.objects.get(username="walker"), model="local", exchanges=110)
    session.append_message("user", [{"type": "text", "text": "the latest"}])
    page = signed_in
    page.goto(f"{server_url}{session.get_absolute_url()}")
    expect(page.locator("#transcript article")).to_have_count(200)
    page.get_by_role("button", name="Show 21 earlier entries").click()
    expect(page.locator("#transcript article")).to_have_count(221)
    expect(page.locator("#transcript article").first).to_contain_text("question 0")
    expect(page.locator("#transcript article").last).to_contain_text("the latest")


def test_a_message_too_long_to_send_is_refused_in_the_page_and_stays_in_the_box(signed_in):
    """A paste of 1.1 million characters: more than the WebSocket carries (daphne closes the
    socket on a message over 1 MB), so the page says so before sending, and keeps it."""
    page = signed_in
    box = a_new_sessions_message_box(page)
    box.evaluate("(box) => { box.value = 'pasted ' + 'x'.repeat(1100000); }")
    box.press("Enter")
    expect(page.locator("#notices")).to_contain_text(
        "Message too long: 1,100,007 characters (the limit is 100,000)."
    )
    assert box.evaluate("(box) => box.value.length") == 1_100_007
    # Counted as the server counts: 60,000 emoji are 120,000 of JavaScript's units, and go.
    box.evaluate("(box) => { box.value = '😀'.repeat(60000); }")
    box.press("Enter")
    expect(box).to_have_value("")
    expect(page.locator("#transcript .entry--user").first).to_contain_text("😀😀😀")
    box.fill("and now a short one")
    box.press("Enter")
    expect(page.locator("#transcript .entry--user").last).to_contain_text("and now a short one")
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_have_count(
        2, timeout=30_000
    )
