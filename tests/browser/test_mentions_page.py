"""The @ menu in Chromium (issue 19, item 4): typing @ offers the user's sessions by title, most
recent first; the keyboard chooses one, and the message shows it by its title."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_at_menu_offers_sessions_by_title_and_the_keyboard_inserts_a_mention(
    signed_in, server_url
):
    page = signed_in
    walker = User.objects.get(username="walker")
    older = make_session(walker, model="local", exchanges=1)
    older.rename("Gateway rewrite")
    newer = make_session(walker, model="local", exchanges=1)
    newer.rename("Gateway tests")
    here = make_session(walker, model="local")
    page.goto(f"{server_url}{here.get_absolute_url()}")
    box = page.get_by_label("Message")
    box.press_sequentially("Carry on from @gate")
    menu = page.get_by_role("listbox", name="Sessions to mention")
    expect(menu).to_be_visible()
    shown = menu.get_by_role("option").filter(visible=True)
    expect(shown).to_have_count(2)
    expect(shown.first).to_contain_text("Gateway tests")  # the most recent first
    box.press("ArrowDown")
    box.press("Enter")
    expect(box).to_have_value(f"Carry on from @#{older.pk} ")
    expect(menu).to_be_hidden()
    box.press_sequentially("please")
    box.press("Enter")
    mention = page.locator("#transcript .entry--user a.mention")
    expect(mention).to_have_text("@Gateway rewrite")
    expect(mention).to_have_attribute("href", f"/sessions/{older.pk}/")
