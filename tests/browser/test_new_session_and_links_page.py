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


@pytest.mark.parametrize("width,height", [(1440, 900), (375, 812)])
def test_an_empty_session_welcomes_with_suggestions_and_the_box_at_the_bottom(
    signed_in, width, height
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": height})
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    welcome = page.get_by_role("region", name="What shall we work on?")
    expect(welcome).to_be_visible()
    for name in (
        "Explain a piece of code",
        "Plan a task with a todo list",
        "/handoff — continue a long session fresh",
    ):
        expect(welcome.get_by_role("button", name=name)).to_be_visible()
    expect(welcome.get_by_role("link", name="Import a session file")).to_be_visible()
    box = page.get_by_label("Message").bounding_box()
    assert box is not None and box["y"] + box["height"] > height * 0.7, box  # near the bottom
    page.screenshot(path=f"test-artifacts/welcome-{width}.png")

    welcome.get_by_role("button", name="Plan a task with a todo list").click()
    message = page.get_by_label("Message")
    expect(message).to_have_value("Plan this task and keep a todo list as you go: ")
    expect(message).to_be_focused()
    message.press_sequentially("ship the importer")
    message.press("Enter")
    expect(page.locator("#transcript article").first).to_contain_text("ship the importer")
    expect(welcome).to_be_hidden()  # the conversation has begun


def test_jump_to_latest_shows_only_when_something_new_comes_below(signed_in, server_url):
    """Rough edge 5: a push that adds nothing below the reader (another session renamed, so
    every tab's sidebar changes) shows no "Jump to latest"; a new message does."""
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 800})
    owner = User.objects.get(username="walker")
    session = make_session(owner, model="local", exchanges=30)
    other = make_session(owner, model="local", exchanges=1)
    linked = session.entries.filter(role="user").order_by("pk")[10]
    page.goto(f"{server_url}/sessions/{session.pk}/#entry-{linked.pk}")
    expect(page.locator(f"#entry-{linked.pk}")).to_be_in_viewport()
    second = page.context.new_page()
    second.goto(f"{server_url}/sessions/{other.pk}/")
    second.locator("details.rename summary", has_text="Rename").click()
    second.get_by_label("Title", exact=True).fill("Renamed elsewhere")
    second.get_by_role("button", name="Save").first.click()
    sidebar = page.get_by_role("complementary", name="Recent sessions")
    expect(sidebar.get_by_role("link", name="Renamed elsewhere")).to_be_visible()
    expect(page.locator("#jump-latest")).to_be_hidden()
    second.goto(f"{server_url}/sessions/{session.pk}/")
    second.get_by_label("Message").fill("something new")
    second.get_by_label("Message").press("Enter")
    expect(page.get_by_role("button", name="Jump to latest ↓")).to_be_visible()
    expect(page.locator(f"#entry-{linked.pk}")).to_be_in_viewport()  # the reader stayed
