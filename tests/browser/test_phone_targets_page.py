"""On a phone (issue 56, rough edge 4), at 375 × 812: every control a finger takes is at least
44 × 44 px, or padded to it; the todo drawer closes on a tap outside it; a code block's Copy
sits above its code; the model picker shows its whole choice."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 375, "height": 812}
CODE = "Run this:\n\n```python\nprint('a rather long line of code to copy')\n```"


def a_session_with_code() -> str:
    session = make_session(User.objects.get(username="walker"), model="local", exchanges=1)
    session.append_message("user", [{"type": "text", "text": "show me"}])
    session.append_message("assistant", [{"type": "text", "text": CODE}])
    return session.get_absolute_url()


def too_small(locator) -> list[str]:
    """Those of the controls `locator` finds that are under 44 px either way."""
    small = []
    for index in range(locator.count()):
        box = locator.nth(index).bounding_box()
        if box is not None and (box["height"] < 44 or box["width"] < 44):
            small.append(
                f"{locator.nth(index).inner_text()!r}: {box['width']:.0f}×{box['height']:.0f}"
            )
    return small


def test_at_375_px_every_control_is_44_px_and_nothing_covers_or_cuts(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(PHONE)
    page.goto(f"{server_url}{a_session_with_code()}")
    expect(page.locator("#transcript .entry--assistant").last).to_be_visible()
    controls = {
        "message actions": page.locator("#transcript .entry-actions button:visible, "
                                        "#transcript .entry-actions summary:visible"),
        "Pin, Archive, Delete": page.locator(".session-tools .care button"),
        "Export links": page.locator(".exports a"),
        "Menu": page.get_by_role("button", name="Menu"),
        "Rename, Instructions, Tree …": page.locator(".session-tools > a, "
                                                    ".session-tools > details > summary"),
    }  # fmt: skip
    for name, found in controls.items():
        assert found.count() > 0, name
        assert too_small(found) == [], name

    # The code block's Copy is above the code, not on it.
    pre = page.locator("#transcript .markdown pre").last
    copy = pre.get_by_role("button", name="Copy code").bounding_box()
    code = pre.locator("code").bounding_box()
    assert copy is not None and code is not None
    assert copy["y"] + copy["height"] <= code["y"] + 1, (copy, code)

    # The model picker shows its whole choice.
    picker = page.locator("#model-picker")
    assert picker.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1")
    assert picker.bounding_box()["width"] > 120

    # The todo drawer closes on a tap outside it.
    drawer = page.locator("#todos")
    page.locator("#todos > summary").click()
    expect(drawer).to_have_attribute("open", "")
    page.mouse.click(20, 400)  # the transcript, left of the drawer
    expect(drawer).not_to_have_attribute("open", "")
    page.screenshot(path="test-artifacts/phone-targets-375.png", full_page=False)


def test_at_375_px_the_preferences_checkboxes_are_big_enough_to_tap(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(PHONE)
    page.goto(f"{server_url}/preferences/")
    boxes = page.locator("input[type=checkbox]")
    assert boxes.count() >= 3
    for index in range(boxes.count()):
        box = boxes.nth(index).bounding_box()
        assert box is not None and box["width"] >= 24 and box["height"] >= 24, box
    labels = page.locator("label.check")
    assert too_small(labels) == []
