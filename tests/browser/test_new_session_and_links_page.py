"""In Chromium (issue 56, rough edges 2 and 3): **New session** puts the cursor in the message
box, and a link to an entry (a recall result, a search hit) shows the entry below the sticky
top bar, its role and time in sight."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_new_session_puts_the_cursor_in_the_message_box(signed_in):
    page = signed_in
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.get_by_label("Message")).to_be_focused()


@pytest.mark.parametrize("width", [1440, 375])
def test_a_linked_entry_shows_below_the_sticky_top_bar(signed_in, server_url, width):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 800})
    session = make_session(User.objects.get(username="walker"), exchanges=30)
    linked = session.entries.filter(role="user").order_by("pk")[10]
    page.goto(f"{server_url}/sessions/{session.pk}/#entry-{linked.pk}")
    entry = page.locator(f"#entry-{linked.pk}")
    expect(entry).to_be_in_viewport()
    bar = page.locator(".topbar").bounding_box()
    box = entry.bounding_box()
    assert bar is not None and box is not None
    assert box["y"] >= bar["y"] + bar["height"], (box, bar)
