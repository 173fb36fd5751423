"""In Chromium (issue 56, item 3): **Share** opens a dialog; **Create link** shows the link in a
read-only field; a signed-out browser reads the conversation there with no message box; after
**Revoke link** the link answers 404."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from ..conftest import make_session
from .test_accessibility_page import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width,scheme", [(1440, "light"), (375, "dark")])
def test_a_link_made_in_the_share_dialog_opens_read_only_signed_out_until_revoked(
    signed_in, server_url, browser, width, scheme
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 850})
    page.emulate_media(color_scheme=scheme)
    session = make_session(User.objects.get(username="walker"), exchanges=2)
    page.goto(f"{server_url}/sessions/{session.pk}/")
    page.get_by_role("button", name="Share", exact=True).click()
    dialog = page.get_by_role("dialog", name=f"Share “{session.display_title}”")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Create link").click()
    field = dialog.get_by_label("Link")
    expect(field).to_have_attribute("readonly", "")
    link = field.input_value()
    assert link.startswith(f"{server_url}/share/"), link
    assert serious_violations(page, f"share dialog at {width}") == []
    page.screenshot(path=f"test-artifacts/share-dialog-{width}.png")

    visitor = browser.new_context(viewport={"width": width, "height": 850}, color_scheme=scheme)
    reader = visitor.new_page()
    reader.goto(link)
    expect(reader.get_by_text("answer 1")).to_be_visible()
    # The list's Share opens the session with its dialog open on the link.
    page.goto(f"{server_url}/sessions/{session.pk}/#share")
    expect(page.get_by_role("dialog").get_by_label("Link")).to_have_value(link)
    expect(reader.get_by_text("Shared by walker on")).to_be_visible()
    expect(reader.locator("#message")).to_have_count(0)
    expect(reader.get_by_role("button", name="Fork")).to_have_count(0)
    assert serious_violations(reader, f"shared page at {width}") == []
    reader.screenshot(path=f"test-artifacts/shared-{width}.png")

    dialog = page.get_by_role("dialog", name=f"Share “{session.display_title}”")
    dialog.get_by_role("button", name="Revoke link").click()
    expect(dialog.get_by_role("button", name="Create link")).to_be_visible()
    gone = reader.goto(link)
    assert gone is not None and gone.status == 404
    visitor.close()
