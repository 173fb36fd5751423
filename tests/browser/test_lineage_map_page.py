"""The lineage map in Chromium (issue 19, item 6): a chain of three handoffs and one fork, drawn
top-down with the current session marked, readable at 375 and 1440 px."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions import handoff

from ..conftest import make_session
from .conftest import ARTIFACTS

pytestmark = pytest.mark.django_db(transaction=True)


def hand_off(old, title: str):
    reply = old.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nGo on."}], data={"purpose": "handoff"}
    )
    new = handoff.new_session(old, from_entry=reply, content=handoff.wrap("## Goal\nGo on."), data={})  # fmt: skip
    new.rename(title)
    new.append_message("user", [{"type": "text", "text": f"working in {title}"}])
    return new


@pytest.mark.parametrize("width", [375, 1440])
def test_the_map_draws_three_handoffs_and_a_fork_with_the_current_one_marked(
    signed_in, server_url, width
):
    page = signed_in
    walker = User.objects.get(username="walker")
    first = make_session(walker, model="local", exchanges=2)
    first.rename("Gateway, the first part of a very long piece of work with a long name")
    second = hand_off(first, "Gateway, part two")
    third = hand_off(second, "Gateway, part three")
    fourth = hand_off(third, "Gateway, part four")
    fork = second.fork(second.leaf_id)
    fork.rename("Gateway, a fork of part two")

    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{server_url}{third.get_absolute_url()}")
    page.get_by_role("link", name="Lineage map").click()
    rows = page.get_by_role("list", name="Lineage map").get_by_role("listitem")
    expect(rows).to_have_count(5)
    titles = [row.get_by_role("link").inner_text() for row in rows.all()]
    assert titles == [
        "Gateway, the first part of a very long piece of work with a long name",
        "Gateway, part two",
        "Gateway, part three",
        "Gateway, part four",
        "Gateway, a fork of part two",
    ]
    assert [row.locator(".lineage-how").inner_text() for row in rows.all()] == [
        "first", "↳ handed off to", "↳ handed off to", "↳ handed off to", "↳ forked into",
    ]  # fmt: skip
    current = page.locator('[aria-current="page"]')
    expect(current).to_contain_text("Gateway, part three")
    expect(current).to_contain_text("this session")
    depths = [row.get_attribute("data-depth") for row in rows.all()]
    assert depths == ["0", "1", "2", "3", "2"]
    wider = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert not wider, "the map is wider than the screen"
    page.screenshot(path=str(ARTIFACTS / f"lineage-map-{width}.png"), full_page=True)
    rows.nth(4).get_by_role("link").click()
    page.wait_for_url(f"{server_url}{fork.get_absolute_url()}")
    assert fourth.pk and page.get_by_role("heading", level=1).count() >= 1
