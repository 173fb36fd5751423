"""A 404 and a refused form (403) are pages of the site (issue 56, rough edge 6): its layout and a way back,
not Django's bare text."""

from __future__ import annotations

import pytest
from django.test import Client

from .conftest import make_session


@pytest.mark.django_db
def test_a_missing_session_is_a_page_of_the_site_with_a_way_back(client: Client, owner):
    client.force_login(owner)
    response = client.get("/sessions/404404/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "<title>Not found · agentweb</title>" in page
    assert '<a href="/">Back to your sessions</a>' in page
    assert 'class="topbar"' in page


@pytest.mark.django_db
def test_another_users_session_is_the_same_404(client: Client, owner, other_user):
    theirs = make_session(other_user)
    client.force_login(owner)
    response = client.get(f"/sessions/{theirs.pk}/")
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in response.content.decode()


@pytest.mark.django_db
def test_a_form_past_its_token_is_a_403_page_that_says_nothing_changed(owner):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    response = strict.post("/preferences/", {"generate_titles": "on"})
    page = response.content.decode()
    assert response.status_code == 403
    assert "<h1>That form has expired</h1>" in page and "Nothing was changed" in page
    assert '<a href="/">Back to your sessions</a>' in page
