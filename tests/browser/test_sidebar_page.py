"""In Chromium (issue 56, item 5): the sidebar filters as you type; its item menu renames in the
session it opens; a rename in one tab shows in another tab's sidebar without a reload; on a
phone it is a drawer from the top bar's **Sessions**, and **New session** is in the chat."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session
from .test_accessibility_page import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


def sessions_of(name: str, *titles: str) -> list[int]:
    owner = User.objects.get(username=name)
    made = []
    for title in titles:
        session = make_session(owner, exchanges=1)
        session.rename(title)
        made.append(session.pk)
    return made


def test_the_filter_and_the_item_menu_and_a_rename_seen_live_in_another_tab(signed_in, server_url):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    shown, other = sessions_of("walker", "Billing export", "Kubernetes upgrade")
    page.goto(f"{server_url}/sessions/{shown}/")
    sidebar = page.get_by_role("complementary", name="Recent sessions")
    page.get_by_label("Filter sessions").fill("kube")
    expect(sidebar.get_by_role("link", name="Kubernetes upgrade")).to_be_visible()
    expect(sidebar.get_by_role("link", name="Billing export")).to_be_hidden()
    page.get_by_label("Filter sessions").fill("")
    assert serious_violations(page, "sidebar") == []

    second = page.context.new_page()
    second.goto(f"{server_url}/sessions/{shown}/")
    expect(second.locator("#status")).to_be_visible()
    sidebar.get_by_label("Actions for Kubernetes upgrade").click()
    sidebar.get_by_role("link", name="Rename").click()
    page.wait_for_url(re.compile(rf"/sessions/{other}/#rename$"))
    expect(page.get_by_label("Title", exact=True)).to_be_focused()
    page.get_by_label("Title", exact=True).fill("Kubernetes 1.31 upgrade")
    page.get_by_role("button", name="Save").first.click()
    live = second.get_by_role("complementary", name="Recent sessions")
    expect(live.get_by_role("link", name="Kubernetes 1.31 upgrade")).to_be_visible()  # no reload
    expect(live.get_by_role("link", name="Billing export")).to_have_attribute(
        "aria-current", "page"
    )
    # The pushed list's forms work: Pin, from the item menu.
    live.get_by_label("Actions for Kubernetes 1.31 upgrade").click()
    live.get_by_role("button", name="Pin").click()
    pinned = "Pinned “Kubernetes 1.31 upgrade” to the top of the list."
    expect(second.get_by_text(pinned)).to_be_visible()


def test_on_a_phone_the_sidebar_is_a_drawer_and_new_session_is_in_the_chat(signed_in, server_url):
    page = signed_in
    page.set_viewport_size({"width": 375, "height": 812})
    [shown] = sessions_of("walker", "Phone session")
    page.goto(f"{server_url}/sessions/{shown}/")
    sidebar = page.get_by_role("complementary", name="Recent sessions")
    expect(sidebar).to_be_hidden()
    page.get_by_role("button", name="Sessions", exact=True).click()
    expect(sidebar.get_by_role("link", name="Phone session")).to_be_visible()
    page.screenshot(path="test-artifacts/sidebar-drawer-375.png")
    page.emulate_media(color_scheme="dark")
    assert serious_violations(page, "sidebar drawer, dark") == []
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(
        lambda url: (found := re.search(r"/sessions/(\d+)/$", url)) and found[1] != str(shown)
    )
    expect(page.get_by_label("Message")).to_be_focused()
