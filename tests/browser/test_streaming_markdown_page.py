"""In Chromium, a reply is formatted while it streams: its heading and list are elements
before the reply ends (issue 11, item 1). The model is the fake Anthropic server, held
mid-reply until the test has looked."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_heading_and_a_list_are_elements_before_the_reply_ends(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(
        Reply.held(["## Plan\n\n", "- read the *logs*\n", "- fix it\n\n", "Then I will"])
    )
    sign_in(page, claude_url, django_user_model, "reader")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("What is the plan?")
    page.get_by_label("Message").press("Enter")
    streaming = page.locator(".entry--streaming")
    expect(streaming.locator("#live-blocks h2")).to_have_text("Plan")
    expect(streaming.locator("li")).to_have_text(["read the logs", "fix it"])
    expect(streaming.locator("li em")).to_have_text("logs")
    expect(streaming.locator("#live-text")).to_have_text("Then I will")
    assert fake_server.wait_for_hold()
    fake_server.release()
    reply = page.locator("#transcript .entry--assistant.status--complete")
    expect(reply.locator(".markdown h2")).to_have_text("Plan")
    expect(reply).to_contain_text("Then I will.")
    expect(streaming).to_have_count(0)
