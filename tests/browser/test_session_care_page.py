"""In Chromium: delete a session by mistake, confirm, and get it back with Undo; pin and
archive from the list (issue 11, item 3)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS

pytestmark = pytest.mark.django_db(transaction=True)


def new_session_saying(page, server_url: str, text: str) -> None:
    page.goto(f"{server_url}/")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_have_count(1)


def test_a_deleted_session_comes_back_with_undo(signed_in, server_url):
    page = signed_in
    new_session_saying(page, server_url, "Plan the migration")
    questions: list[str] = []

    def answer(dialog, accept: bool) -> None:
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    # Asked first: dismissing the question keeps the session.
    page.once("dialog", lambda dialog: answer(dialog, False))
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Plan the migration")
    page.once("dialog", lambda dialog: answer(dialog, True))
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"{server_url}/")
    assert questions == ["Delete this session? You can undo it for a while."] * 2
    expect(page.get_by_role("status").or_(page.locator(".flash"))).to_contain_text(
        "Deleted “Plan the migration”."
    )
    expect(page.get_by_role("link", name="Plan the migration")).to_have_count(0)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "recently-deleted.png"), full_page=True)

    page.get_by_role("button", name="Undo delete").click()
    expect(page.locator(".flash")).to_contain_text("Restored “Plan the migration”.")
    page.get_by_role("link", name="Plan the migration").click()
    expect(page.locator("#transcript .entry--user")).to_contain_text("Plan the migration")


def test_pin_and_archive_from_the_list(signed_in, server_url):
    page = signed_in
    new_session_saying(page, server_url, "First topic")
    new_session_saying(page, server_url, "Second topic")
    page.goto(f"{server_url}/")
    titles = page.locator(".session-title a")
    expect(titles).to_have_text(["Second topic", "First topic"])
    page.get_by_role("group", name="Care of First topic").get_by_role("button", name="Pin").click()
    expect(titles).to_have_text(["First topic", "Second topic"])
    care = page.get_by_role("group", name="Care of Second topic")
    care.get_by_role("button", name="Archive").click()
    expect(titles).to_have_text(["First topic"])
    page.get_by_role("link", name="Archived (1)").click()
    expect(titles).to_have_text(["Second topic"])
