"""In Chromium (issue 56, items 2 and 4): custom instructions set in Preferences and a session's
own set by `/instructions` show folded at the top of the session; a reply's task list shows
read-only boxes and its math MathML, at 1440 and 375 px, axe clean in light and dark."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session
from .test_accessibility_page import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Progress:\n\n- [x] dump the schema\n- [ ] load it\n\nThe energy is $$E = mc^2$$ here."


@pytest.mark.parametrize("width,scheme", [(1440, "light"), (375, "dark")])
def test_instructions_show_folded_and_a_reply_renders_task_boxes_and_math(
    signed_in, server_url, width, scheme
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{server_url}/preferences/")
    page.get_by_label("Custom instructions").fill("Answer in British English.")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Preferences saved.")).to_be_visible()

    session = make_session(User.objects.get(username="walker"), model="local")
    session.append_message("user", [{"type": "text", "text": "Where are we?"}])
    session.append_message("assistant", [{"type": "text", "text": REPLY}])
    page.goto(f"{server_url}/sessions/{session.pk}/")
    yours = page.locator("details.instructions", has_text="Your custom instructions")
    expect(yours).to_be_visible()
    yours.locator("summary").click()
    expect(yours.get_by_text("Answer in British English.")).to_be_visible()
    page.get_by_label("Message").fill("/instructions Only the billing service.")
    page.get_by_label("Message").press("Enter")
    own = page.locator("details.instructions", has_text="This session's instructions")
    expect(own).to_be_visible()

    boxes = page.locator("#transcript .markdown input[type=checkbox]")
    expect(boxes).to_have_count(2)
    expect(boxes.nth(0)).to_be_checked()
    expect(boxes.nth(0)).to_be_disabled()
    expect(boxes.nth(1)).not_to_be_checked()
    expect(page.locator("#transcript math")).to_be_visible()
    assert serious_violations(page, f"instructions and rendering at {width}, {scheme}") == []
    page.screenshot(path=f"test-artifacts/instructions-math-{width}.png")
