"""Every id, index and count from a URL, form or frame is read by one parser: ASCII digits only,
so "²" (a digit to `str.isdigit()`, not to `int()`) and "٣" (a digit to `int()`) are no ids."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from sessions.forms import FrameError, parse_frame
from sessions.models import ChatSession
from sessions.numbers import whole_number

from .conftest import make_session

pytestmark = pytest.mark.django_db

NOT_ASCII_DIGITS = ["²", "٣", "1_0", " 7", "7\n", "-1", "+1", "1e3", "9" * 20, ""]


@pytest.fixture
def signed_in(owner) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    return client


@pytest.mark.parametrize("typed", NOT_ASCII_DIGITS)
def test_only_ascii_digits_within_a_database_integer_are_a_number(typed):
    assert whole_number(typed) is None


def test_ascii_digits_and_json_integers_are_read_and_booleans_are_not():
    assert whole_number("0042") == 42
    assert whole_number(9_223_372_036_854_775_807) == 2**63 - 1
    assert whole_number(2**63) is None
    assert whole_number(True) is None
    assert whole_number("12", largest=11) is None


@pytest.mark.parametrize("typed", ["²", "٣"])
def test_the_session_page_shows_its_latest_entries_for_an_unreadable_at(signed_in, owner, typed):
    session = make_session(owner, exchanges=1)
    response = signed_in.get(session.get_absolute_url(), {"at": typed})
    assert response.status_code == 200
    assert "answer 0" in response.content.decode()


@pytest.mark.parametrize("typed", ["²", "٣", "9" * 30])
def test_earlier_entries_and_the_list_page_take_an_unreadable_number_as_none(
    signed_in, owner, typed
):
    session = make_session(owner, exchanges=1)
    assert (
        signed_in.get(reverse("chat:earlier", args=[session.pk]), {"before": typed}).status_code
        == 200
    )
    assert signed_in.get(reverse("chat:index"), {"page": typed}).status_code == 200


@pytest.mark.parametrize("action", ["switch", "fork"])
@pytest.mark.parametrize("typed", ["²", "٣"])
def test_a_branch_or_fork_to_an_unreadable_entry_is_refused_in_words(
    signed_in, owner, action, typed
):
    session = make_session(owner, exchanges=1)
    response = signed_in.post(
        reverse(f"chat:{action}", args=[session.pk]), {"entry": typed}, follow=True
    )
    assert response.status_code == 200
    assert "That entry is not part of this session." in response.content.decode()
    assert ChatSession.objects.count() == 1


@pytest.mark.parametrize("typed", ["²", "٣"])
def test_a_todo_change_with_an_unreadable_tick_is_refused_in_words(signed_in, owner, typed):
    session = make_session(owner)
    response = signed_in.post(
        reverse("chat:todos", args=[session.pk]),
        {"text": ["write it"], "state": ["pending"], "done": [typed], "op": "save"},
        follow=True,
    )
    assert response.status_code == 200
    assert "That change to the todo list could not be read: reload the page." in (
        response.content.decode()
    )


@pytest.mark.parametrize("typed", ["٣", "²", 2**64, True])
def test_a_frame_naming_an_unreadable_entry_is_refused_in_words(typed):
    with pytest.raises(FrameError, match="Enter a whole number"):
        parse_frame(json.dumps({"action": "regenerate", "entry": typed}))
