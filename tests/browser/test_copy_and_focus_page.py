"""In Chromium: every message and code block has a Copy button that puts its text on the
clipboard (a message's markdown, issue 56 rough edge 11), and the message box keeps the focus after sending and after cancelling (issue 11,
item 7)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = ["Run this:\n\n", "```python\n", "print('hi')\n", "```\n\n", "Then **check** it."]


def test_copy_takes_a_whole_message_or_just_its_code(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(Reply(chunks=REPLY))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=claude_url)
    sign_in(page, claude_url, django_user_model, "copier")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("How do I say hi?")
    page.get_by_label("Message").press("Enter")
    reply = page.locator("#transcript .entry--assistant.status--complete")
    reply.get_by_role("button", name="Copy code").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print('hi')\n"
    reply.get_by_role("button", name="Copy text").click()
    expect(reply.get_by_role("button", name="Copy text")).to_have_class(re.compile("copied"))
    assert page.evaluate("navigator.clipboard.readText()") == (  # the markdown, as written
        "Run this:\n\n```python\nprint('hi')\n```\n\nThen **check** it."
    )
    mine = page.locator("#transcript .entry--user")
    mine.get_by_role("button", name="Copy text").click()
    expect(mine.get_by_role("button", name="Copy text")).to_have_class(re.compile("copied"))
    assert page.evaluate("navigator.clipboard.readText()") == "How do I say hi?"


def test_the_message_box_keeps_the_focus_after_sending_and_after_cancelling(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(Reply.held(["Thinking about it"]))
    sign_in(page, claude_url, django_user_model, "typist")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    box = page.get_by_label("Message")
    box.fill("Take your time")
    page.get_by_role("button", name="Send").click()
    expect(box).to_have_value("")
    expect(box).to_be_focused()
    expect(page.locator("#live-text")).to_have_text("Thinking about it")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#transcript .entry--assistant")).to_contain_text("Cancelled")
    expect(box).to_be_focused()
