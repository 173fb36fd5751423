"""In Chromium: dark mode follows the system's colour scheme, a toggle overrides it (auto → dark
→ light) and the choice survives a reload; screenshots of the session page in light and dark at
375 and 1440 px wide are saved as test artifacts (issue 11, item 7)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import ARTIFACTS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

LIGHT_BACKGROUND = "rgb(247, 247, 245)"
DARK_BACKGROUND = "rgb(21, 23, 26)"


def background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


CODE_REPLY = ["Like this:\n\n", "```python\n", "def hello():\n", "    return 'hi'\n", "```\n"]


def a_session_with_code(page, claude_url: str, fake_server, django_user_model) -> None:
    fake_server.reset()
    fake_server.enqueue(Reply(chunks=CODE_REPLY))
    sign_in(page, claude_url, django_user_model, "night-owl")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("How do I greet in Python?")
    page.get_by_label("Message").press("Enter")
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_have_count(1)


def test_the_page_follows_the_system_until_the_toggle_says_otherwise(signed_in, server_url):
    page = signed_in
    page.emulate_media(color_scheme="dark")
    page.reload()
    toggle = page.get_by_role("button", name=re.compile("^Theme: "))
    expect(toggle).to_have_text("Theme: auto")
    assert background(page) == DARK_BACKGROUND

    page.emulate_media(color_scheme="light")
    assert background(page) == LIGHT_BACKGROUND

    toggle.click()
    expect(toggle).to_have_text("Theme: dark")
    assert background(page) == DARK_BACKGROUND
    page.reload()
    expect(toggle).to_have_text("Theme: dark")
    assert background(page) == DARK_BACKGROUND

    page.emulate_media(color_scheme="dark")
    toggle.click()
    expect(toggle).to_have_text("Theme: light")
    assert background(page) == LIGHT_BACKGROUND
    page.goto(f"{server_url}/preferences/")
    expect(toggle).to_have_text("Theme: light")
    assert background(page) == LIGHT_BACKGROUND

    toggle.click()
    expect(toggle).to_have_text("Theme: auto")
    assert background(page) == DARK_BACKGROUND


def test_code_is_highlighted_for_the_theme_in_use(page, claude_url, fake_server, django_user_model):
    a_session_with_code(page, claude_url, fake_server, django_user_model)
    keyword = page.locator("#transcript .entry--assistant .highlight .k").first
    expect(keyword).to_have_text("def")
    light = keyword.evaluate("el => getComputedStyle(el).color")
    page.get_by_role("button", name="Theme: auto").click()
    expect(page.get_by_role("button", name="Theme: dark")).to_be_visible()
    dark = keyword.evaluate("el => getComputedStyle(el).color")
    assert light != dark
    code_background = page.locator("#transcript .entry--assistant pre").first.evaluate(
        "el => getComputedStyle(el).backgroundColor"
    )
    assert code_background == "rgb(13, 17, 23)"


@pytest.mark.parametrize("width", [375, 1440])
def test_screenshots_of_the_session_page_in_light_and_dark(
    page, claude_url, fake_server, django_user_model, width
):
    page.set_viewport_size({"width": width, "height": 900})
    a_session_with_code(page, claude_url, fake_server, django_user_model)
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme, expected in (("light", LIGHT_BACKGROUND), ("dark", DARK_BACKGROUND)):
        page.emulate_media(color_scheme=scheme)
        assert background(page) == expected
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {width}px"
        page.screenshot(path=str(ARTIFACTS / f"session-{scheme}-{width}.png"), full_page=True)
