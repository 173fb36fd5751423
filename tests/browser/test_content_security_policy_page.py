"""Under the Content-Security-Policy (issue 18, item 9): no inline script, no eval, scripts and
styles from the site's own files only, and every page works with no violation recorded: the
list, a session (chatting over the socket, the todo panel, the shortcuts, the theme), the tree,
side by side, the preferences, the sign-in and the import."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions import handoff

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = {
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'self'",
    "frame-ancestors 'none'",
}  # fmt: skip
RECORD = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI} ${event.sample}`);
});
"""


def violations(page) -> list[str]:
    return page.evaluate("window.__violations")


def visit(page, url: str) -> set[str]:
    """The page's policy, its directives one by one (their order means nothing)."""
    response = page.goto(url)
    page.wait_for_load_state("networkidle")
    return set(response.headers["content-security-policy"].split("; "))


def test_the_sign_in_page_sends_the_policy_and_breaks_none_of_it(
    page, server_url, transactional_db
):
    page.add_init_script(RECORD)
    assert visit(page, f"{server_url}/accounts/login/") == POLICY
    assert violations(page) == []


def test_every_page_works_under_the_policy(signed_in, server_url):
    page = signed_in
    page.add_init_script(RECORD)
    walker = User.objects.get(username="walker")
    old = make_session(walker, model="local", exchanges=2)
    reply = old.append_message(
        "assistant",
        [{"type": "text", "text": "## Goal\nShip `src/app.py`."}],
        data={"purpose": "handoff"},
    )
    new = handoff.new_session(old, from_entry=reply, content="## Goal\nShip `src/app.py`.", data={"warnings": []})  # fmt: skip

    for path in ("/", f"/sessions/{old.pk}/tree/", f"/sessions/{old.pk}/compare/{new.pk}/", "/preferences/"):  # fmt: skip
        assert visit(page, f"{server_url}{path}") == POLICY
        assert violations(page) == [], path

    chat = make_session(walker, model="local")
    visit(page, f"{server_url}{chat.get_absolute_url()}")
    box = page.get_by_label("Message")
    box.fill("Please read `src/main.py`")
    box.press("Enter")  # over the WebSocket, which connect-src 'self' allows
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_contain_text(
        "offline model", timeout=30_000
    )
    page.get_by_role("button", name=re.compile("^Theme")).click()  # the theme script
    page.keyboard.press("Escape")
    page.locator("body").press("?")  # the shortcuts dialog, opened by app.js
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    page.get_by_role("button", name="Close").click()
    assert violations(page) == []


@pytest.mark.parametrize("width", [375, 1440])
def test_an_aligned_table_keeps_its_alignment_under_the_policy(signed_in, server_url, width):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.add_init_script(RECORD)
    walker = User.objects.get(username="walker")
    session = make_session(walker, model="local")
    table = "| Left | Centre | Right | Plain |\n|:--|:-:|--:|---|\n| a | b | c | d |"
    session.append_message("user", [{"type": "text", "text": "A table, please."}])
    session.append_message("assistant", [{"type": "text", "text": table}])
    visit(page, f"{server_url}{session.get_absolute_url()}")
    cells = page.locator("#transcript .entry--assistant td")
    expect(cells).to_have_count(4)
    aligned = [cell.evaluate("c => getComputedStyle(c).textAlign") for cell in cells.all()]
    assert aligned[:3] == ["left", "center", "right"]
    assert violations(page) == []
