"""The account page (issue 56, item 8): linked from the top bar, in the site's style: the
account's usage over the last 30 days, its password changed, its other sign-ins ended."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions.models import Entry

from .conftest import make_session

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-123"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_top_bar_links_to_the_account_page_which_shows_the_last_30_days(owner):
    session = make_session(owner, exchanges=1)
    recent = {"input_tokens": 1_200, "output_tokens": 300}
    session.append_message("assistant", [{"type": "text", "text": "x"}], **recent)
    old = session.append_message(
        "assistant", [{"type": "text", "text": "y"}], input_tokens=9_000, output_tokens=900
    )
    Entry.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    client = signed_in(owner)
    assert '<a href="/account/">Account</a>' in client.get("/").content.decode()
    page = client.get("/account/").content.decode()
    assert '<h1 id="account-title">Account: owner</h1>' in page
    assert "<h2>Usage, the last 30 days</h2>" in page
    assert "<p>1,200 in · 300 out</p>" in page and "9,000" not in page  # 31 days ago: out


def test_a_password_changed_on_the_account_page_ends_the_other_sign_ins(owner):
    owner.set_password(PASSWORD)
    owner.save()
    here, elsewhere = signed_in(owner), signed_in(owner)
    wrong = here.post(
        "/account/",
        {"old_password": "nope", "new_password1": "Nn-93-qx!", "new_password2": "Nn-93-qx!"},
    )
    assert "Your old password was entered incorrectly." in wrong.content.decode()
    done = here.post(
        "/account/",
        {"old_password": PASSWORD, "new_password1": "Nn-93-qx!", "new_password2": "Nn-93-qx!"},
        follow=True,
    )
    assert "Password changed: your other sign-ins have ended." in done.content.decode()
    assert here.get("/account/").status_code == 200
    assert elsewhere.get("/account/").status_code == 302  # to the sign-in page


def test_sign_out_of_other_devices_ends_them_and_keeps_this_one(owner, other_user):
    here, elsewhere, someone = signed_in(owner), signed_in(owner), signed_in(other_user)
    answer = here.post("/account/sign-out-others/", follow=True)
    assert "1 other sign-in ended." in answer.content.decode()
    assert here.get("/").status_code == 200
    assert elsewhere.get("/").status_code == 302
    assert someone.get("/").status_code == 200  # another user's sign-in is not touched
    again = here.post("/account/sign-out-others/", follow=True)
    assert "No other sign-in ended." in again.content.decode()
