"""Accessibility (issue 11, item 8): axe-core finds no serious or critical violation on the list,
session, side-by-side, tree and preferences pages, in light and in dark; and everything a chat
needs works by keyboard alone: send, cancel, edit, the branch switcher, /handoff and side by
side."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from ..conftest import SIX_SECTIONS
from ..fake_anthropic import Reply
from .conftest import focus_by_tab, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

DOCUMENT = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)
CODE_REPLY = [
    "Like this:\n\n",
    "```python\n",
    "# greet the user\n",
    "def hello(name: str) -> str:\n",
    "    return f'hi {name}'  # a comment\n",
    "```\n\n",
    "| key | value |\n|---|---|\n| a | 1 |\n",
]


def serious_violations(page, where: str) -> list[str]:
    results = Axe().run(page)
    return [
        f"{where}: {violation['id']} ({violation['impact']}) at "
        + ", ".join(str(node["target"]) for node in violation["nodes"][:3])
        for violation in results.response["violations"]
        if violation["impact"] in ("serious", "critical")
    ]


@pytest.fixture
def chain(page, claude_url, fake_server, django_user_model):
    """A session with code, a table, a regenerated reply (a branch switcher) and a handoff;
    the page is on the new session."""
    fake_server.reset()
    fake_server.enqueue(
        Reply(chunks=CODE_REPLY), Reply(chunks=CODE_REPLY), Reply(chunks=[DOCUMENT])
    )
    sign_in(page, claude_url, django_user_model, "reader")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    old_url = page.url
    page.get_by_label("Message").fill("How do I greet in Python?")
    page.get_by_label("Message").press("Enter")
    page.locator("#transcript").get_by_role("button", name="Regenerate").click()
    expect(page.locator("#transcript .branch-position")).to_have_text("2 / 2")
    page.get_by_label("Message").fill("/handoff")
    page.get_by_label("Message").press("Enter")
    page.wait_for_url(lambda url: url != old_url and re.search(r"/sessions/\d+/$", url))
    return old_url


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_violations_on_any_page(page, claude_url, chain, scheme):
    page.emulate_media(color_scheme=scheme)
    found: list[str] = []
    pages = {
        "session list": f"{claude_url}/",
        "handed-off session": page.url,
        "old session": chain,
        "tree": f"{chain}tree/",
        "preferences": f"{claude_url}/preferences/",
        "account": f"{claude_url}/account/",
    }
    for where, url in pages.items():
        page.goto(url)
        found += serious_violations(page, where)
    page.goto(pages["handed-off session"])
    page.get_by_role("link", name="Side by side").click()
    expect(page.locator("#column-old")).to_be_visible()
    found += serious_violations(page, "side by side")
    page.goto(pages["old session"])
    page.locator("h1").click()
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    found += serious_violations(page, "shortcut list")
    assert found == []


def test_a_whole_conversation_by_keyboard_alone(page, claude_url, fake_server, django_user_model):
    fake_server.reset()
    fake_server.enqueue(
        Reply.held(["Thinking about it"]),
        Reply.text("Use tomllib."),
        Reply.text("Use configparser."),
        Reply(chunks=[DOCUMENT]),
    )
    sign_in(page, claude_url, django_user_model, "keyboarder")
    focus_by_tab(page, page.get_by_role("button", name="New session"))
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    transcript = page.locator("#transcript")

    # Send, then cancel the reply with the Cancel button.
    box = page.get_by_label("Message")
    focus_by_tab(page, box)
    page.keyboard.type("Which parser for TOML?")
    focus_by_tab(page, page.get_by_role("button", name="Send"))
    page.keyboard.press("Enter")
    expect(page.locator("#live-text")).to_have_text("Thinking about it")
    focus_by_tab(page, page.get_by_role("button", name="Cancel"))
    page.keyboard.press("Enter")
    expect(transcript.locator(".entry--assistant")).to_contain_text("Cancelled")
    expect(box).to_be_focused()

    # Edit the question: open "Edit", type the new wording, send it.
    question = transcript.locator(".entry--user")
    focus_by_tab(page, question.get_by_text("Edit", exact=True))
    page.keyboard.press("Enter")
    wording = question.get_by_label("New wording")
    focus_by_tab(page, wording)
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("Which parser for TOML, in 3.11?")
    focus_by_tab(page, question.get_by_role("button", name="Send edited message"))
    page.keyboard.press("Enter")
    answer = transcript.locator(".entry--assistant.status--complete")
    expect(answer).to_have_text(re.compile("Use tomllib."))
    expect(transcript.locator(".entry--user .branch-position")).to_have_text("2 / 2")

    # Regenerate, then go back a branch with ‹.
    focus_by_tab(page, transcript.get_by_role("button", name="Regenerate"))
    page.keyboard.press("Enter")
    expect(answer).to_have_text(re.compile("Use configparser."))
    previous = transcript.locator(".entry--assistant").get_by_role("button", name="Previous branch")
    page.locator("h1").click()
    focus_by_tab(page, previous)
    page.keyboard.press("Enter")
    expect(transcript.locator(".entry--assistant")).to_have_text(re.compile("Use tomllib."))
    expect(transcript.locator(".entry--assistant .branch-position")).to_have_text("1 / 2")

    # /handoff, then side by side.
    focus_by_tab(page, box)
    old_url = page.url
    page.keyboard.type("/handoff")
    page.keyboard.press("Escape")  # closes the command menu
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url != old_url and re.search(r"/sessions/\d+/$", url))
    focus_by_tab(page, page.get_by_role("link", name="Side by side"))
    page.keyboard.press("Enter")
    expect(page.locator("#column-old")).to_be_visible()
    expect(page.locator("#column-old .handoff-focus")).to_contain_text("Handoff document")
    expect(page.locator("#column-new .handoff-focus")).to_contain_text(
        "New session started with handoff context"
    )
