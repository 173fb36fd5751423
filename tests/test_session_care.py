"""Session care (issue 11, item 3): titles cut at a word boundary, and the sessions of a chain
told apart by their part and date, in the list and on the page."""

from __future__ import annotations

import pytest

from sessions import store

from .conftest import make_session

pytestmark = pytest.mark.django_db


def test_a_title_is_cut_at_a_word_boundary_with_an_ellipsis():
    text = "Please look at the failing build: the config lives in src/settings.py and the tests"
    title = store.title_from(text)
    assert title == "Please look at the failing build: the config lives in src/settings.py and the…"
    assert len(title) <= store.TITLE_LENGTH


def test_a_short_first_line_is_the_whole_title_and_blank_lines_are_skipped():
    assert store.title_from("\n\n   Fix   the\tlogin  \nsecond line") == "Fix the login"


def test_a_single_word_longer_than_a_title_is_cut_where_it_must():
    title = store.title_from("x" * 300)
    assert title == "x" * (store.TITLE_LENGTH - 1) + "…"


def test_the_first_message_names_the_session_by_whole_words(owner):
    session = make_session(owner)
    store.append_message(session, "user", [{"type": "text", "text": "word " * 40}])
    session.refresh_from_db()
    assert session.title.endswith("word…")
    assert "wor…" not in session.title


def chain_of_three(owner):
    first = make_session(owner, exchanges=1)
    store.append_message(first, "user", [{"type": "text", "text": "Port the parser"}])
    sessions = [first]
    for _ in range(2):
        reply = store.append_message(sessions[-1], "assistant", [{"type": "text", "text": "doc"}])
        sessions.append(store.hand_off(sessions[-1], from_entry=reply, content="doc", data={}))
    return sessions


def test_the_list_tells_the_sessions_of_a_chain_apart_by_part_and_date(client, owner):
    first, second, third = chain_of_three(owner)
    client.force_login(owner)
    page = client.get("/").content.decode()
    for part, session in enumerate((first, second, third), start=1):
        assert f"part {part} · {session.created_at:%-d %b %Y}" in page


def test_a_later_session_of_a_chain_says_which_part_it_is(client, owner):
    first, second, third = chain_of_three(owner)
    client.force_login(owner)
    assert "part 3 · " in client.get(third.get_absolute_url()).content.decode()
    assert "part 2 · " in client.get(second.get_absolute_url()).content.decode()
    assert "part 1" not in client.get(first.get_absolute_url()).content.decode()
