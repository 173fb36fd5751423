"""Side by side after a real handoff in the browser; tabs on a narrow screen; a screenshot kept."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session
from .conftest import ARTIFACTS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def handed_off(signed_in, server_url):
    """A conversation handed off through the page; the page is on the new session."""
    page = signed_in
    session = make_session(User.objects.get(username="walker"), model="local")
    for text in (
        "Fix src/parser.py so it never raises KeyError: 'id'",
        "We decided to use tomllib instead.",
    ):
        session.append_message("user", [{"type": "text", "text": text}])
        session.append_message("assistant", [{"type": "text", "text": "Noted, taking 850 ms now."}])
    page.goto(f"{server_url}{session.get_absolute_url()}")
    page.get_by_label("Message").fill("/handoff")
    page.get_by_label("Message").press("Enter")
    page.wait_for_url(re.compile(rf"/sessions/(?!{session.pk}/)\d+/$"), timeout=30_000)
    return page


def test_side_by_side_shows_both_columns_with_the_handoff_highlighted(handed_off):
    page = handed_off
    expect(page.get_by_label("Message")).to_be_focused()  # typing goes on in the new session
    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_role("link", name="Side by side").click()
    old, new = page.locator("#column-old"), page.locator("#column-new")
    expect(old).to_be_visible()
    expect(new).to_be_visible()
    expect(old.locator(".handoff-focus")).to_contain_text("Handoff document")
    expect(new.locator(".handoff-focus")).to_contain_text(
        "New session started with handoff context"
    )
    expect(old.locator(".handoff-focus")).to_be_in_viewport()
    expect(new.locator(".handoff-focus")).to_be_in_viewport()
    coverage = page.locator(".coverage")
    expect(coverage).to_contain_text("What the handoff carried")
    expect(coverage).to_contain_text(re.compile(r"\d+% salience-weighted coverage"))
    expect(coverage).to_contain_text(re.compile(r"\d+ of \d+ salient items"))
    coverage.get_by_text(re.compile(r"All \d+ items?, by kind")).click()
    expect(coverage.locator(".carried").filter(has_text="src/parser.py")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "side-by-side.png"), full_page=True)
    assert (ARTIFACTS / "side-by-side.png").stat().st_size > 10_000


def test_on_a_narrow_screen_the_columns_become_tabs(handed_off):
    page = handed_off
    page.set_viewport_size({"width": 375, "height": 800})
    page.get_by_role("link", name="Side by side").click()
    old_tab = page.get_by_role("tab", name=re.compile("Old"))
    new_tab = page.get_by_role("tab", name=re.compile("New"))
    expect(new_tab).to_have_attribute("aria-selected", "true")
    expect(page.locator("#column-new")).to_be_visible()
    expect(page.locator("#column-old")).to_be_hidden()
    old_tab.click()
    expect(page.locator("#column-old")).to_be_visible()
    expect(page.locator("#column-new")).to_be_hidden()
    expect(page.locator("#column-old .handoff-focus")).to_be_in_viewport()
    page.screenshot(path=str(ARTIFACTS / "side-by-side-narrow.png"))
