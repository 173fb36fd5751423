"""In Chromium: `?` shows the keyboard-shortcut list (but not while typing), Escape closes it
without cancelling anything, and relative times ("now", "5 minutes ago") keep up with the clock
(issue 11, item 7)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_question_mark_shows_the_shortcut_list_unless_you_are_typing(signed_in, server_url):
    page = signed_in
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    shortcuts = page.get_by_role("dialog", name="Keyboard shortcuts")
    box = page.get_by_label("Message")

    box.press("?")
    expect(box).to_have_value("?")
    expect(shortcuts).to_be_hidden()

    box.fill("")
    page.locator("h1").click()
    page.keyboard.press("?")
    expect(shortcuts).to_be_visible()
    expect(shortcuts).to_contain_text(
        "EscapeClose the open menu or drawer; with none open, cancel the reply or handoff being"
    )
    expect(shortcuts).to_contain_text("?Show this list (when not typing)")
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()

    page.get_by_role("button", name="Shortcuts").click()
    expect(shortcuts).to_be_visible()
    shortcuts.get_by_role("button", name="Close").click()
    expect(shortcuts).to_be_hidden()


def test_escape_in_the_shortcut_list_does_not_cancel_the_reply(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(Reply.held(["Once upon"], [" a time."]))
    sign_in(page, claude_url, django_user_model, "listener")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("Tell me a story")
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#live-text")).to_have_text("Once upon")  # held until released
    page.locator("h1").click()
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_hidden()
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()  # still generating
    fake_server.release()
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_contain_text(
        "Once upon a time."
    )
    expect(page.locator("#transcript .entry--assistant")).not_to_contain_text("Cancelled")


def test_relative_times_keep_up_with_the_clock(signed_in, server_url):
    page = signed_in
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("What time is it?")
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_have_count(1)

    page.clock.install()
    page.goto(f"{server_url}/")
    updated = page.locator(".chain-list time[data-relative]").first
    expect(updated).to_have_text("now")
    assert re.fullmatch(r"\d{1,2} \w{3} \d{4}, \d{2}:\d{2}", updated.get_attribute("title"))

    page.clock.fast_forward("05:00")
    expect(updated).to_have_text("5 minutes ago")
    page.clock.fast_forward("02:00:00")
    expect(updated).to_have_text("2 hours ago")
    page.clock.fast_forward("24:00:00")
    expect(updated).to_have_text("1 day ago")  # never "yesterday": the server's wording
    page.clock.fast_forward(400 * 24 * 3600 * 1000)
    expect(updated).to_have_text("1 year ago")
