"""A password change made with a session tab open (issue 51, item 2): the sign-in that made it
stays signed in, and its tabs keep working; the other sign-ins' sockets close."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [375, 1440])
def test_a_password_change_keeps_its_own_tab_signed_in_and_working(
    signed_in, server_url, django_user_model, width
):
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    walker = django_user_model.objects.get(username="walker")
    session = make_session(walker, model="local")
    page.goto(f"{server_url}{session.get_absolute_url()}")
    expect(page.locator("#status")).to_be_visible()
    page.wait_for_load_state("networkidle")  # its socket open

    account = page.context.new_page()  # another tab of the same sign-in
    account.goto(f"{server_url}/")
    account.get_by_role("link", name="Account").click()  # the top bar's (issue 56, item 8)
    account.wait_for_url(f"{server_url}/account/")
    account.locator("[name=old_password]").fill("walker-pass-123")
    account.locator("[name=new_password1]").fill("a-new-pass-456")
    account.locator("[name=new_password2]").fill("a-new-pass-456")
    with account.expect_response(lambda r: r.request.method == "POST") as answered:
        account.get_by_role("button", name="Change password").click()
    assert answered.value.status == 302
    expect(account.get_by_text("Password changed: your other sign-ins have ended.")).to_be_visible()
    account.goto(f"{server_url}/")
    expect(account.get_by_role("button", name="New session")).to_be_visible()  # still signed in

    box = page.get_by_label("Message")  # the tab open during the change still chats
    box.fill("Still here?")
    box.press("Enter")
    expect(page.locator("#transcript .entry--assistant.status--complete")).to_be_visible(
        timeout=30_000
    )
