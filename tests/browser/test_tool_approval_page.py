"""In Chromium: a tool call's question (issue 53), answered by keyboard alone, on a phone's
375 px as on a desk, with no serious accessibility violation. The tool is the tests' own MCP
server's `write`; the model is the fake Anthropic server."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from ..mcp_servers import servers_file, workshop_spec
from ..servers import Daphne
from .conftest import focus_by_tab, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def tools_url(
    django_db_setup: Any, browser_available: None, fake_server: Any
) -> Iterator[tuple[str, Path]]:
    """daphne with Claude at the fake server and the workshop MCP server; its notes folder."""
    from ..conftest import claude_env

    folder = Path(tempfile.mkdtemp(prefix="agentweb-tools-"))
    notes = folder / "notes"
    notes.mkdir()
    configured = servers_file(folder, workshop=workshop_spec(notes))
    daphne = Daphne(
        "daphne-browser-tools", **claude_env(fake_server.url), AGENTWEB_MCP_SERVERS=configured
    )
    yield daphne.url, notes
    daphne.stop()


def asked(page: Any, url: str, fake_server: Any, django_user_model: Any, user: str) -> Any:
    """A new session whose model asks to write `<user>.txt`; the question's card."""
    fake_server.reset()
    fake_server.enqueue(
        Reply.tool("mcp__workshop__write", {"name": f"{user}.txt", "body": "x" * 900}),
        Reply.text("The report is written."),
    )
    sign_in(page, url, django_user_model, user)
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("Write the report")
    page.get_by_label("Message").press("Enter")
    card = page.get_by_role("group", name="Run mcp__workshop__write?")
    expect(card).to_be_visible()
    return card


def test_the_question_is_answered_by_keyboard_alone_and_axe_finds_nothing_serious(
    page, tools_url, fake_server, django_user_model
):
    url, notes = tools_url
    card = asked(page, url, fake_server, django_user_model, "keyboarder")
    expect(card).to_contain_text("A tool of the MCP server workshop that may change things.")
    expect(card.get_by_text("Arguments in full")).to_be_visible()  # the long value is folded
    violations = [
        f"{v['id']} ({v['impact']}) at {[n['html'][:400] for n in v['nodes'][:3]]}"
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert violations == []

    allow = card.get_by_role("button", name="Allow once")
    focus_by_tab(page, allow)
    page.keyboard.press("Enter")
    expect(page.locator("#transcript")).to_contain_text("The report is written.")
    expect(card).to_contain_text("Allowed once")
    expect(card.get_by_role("button")).to_have_count(0)
    assert "keyboarder.txt" in (notes / "written").read_text()


def test_at_375_px_the_card_fits_and_deny_is_in_reach(
    page, tools_url, fake_server, django_user_model
):
    url, notes = tools_url
    page.set_viewport_size({"width": 375, "height": 740})
    card = asked(page, url, fake_server, django_user_model, "phoner")
    for name in ("Allow once", "Allow for this session", "Deny"):
        box = card.get_by_role("button", name=name).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    deny = card.get_by_role("button", name="Deny")
    focus_by_tab(page, deny)
    page.keyboard.press("Enter")
    expect(card).to_contain_text("Denied")
    expect(page.locator("#transcript")).to_contain_text("The report is written.")
    written = notes / "written"
    assert not written.exists() or "phoner.txt" not in written.read_text()
