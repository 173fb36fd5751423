"""Titles a person reads (issue 20, item 5): no markdown marks wherever a title shows, a fork's
title says it is one, and a chain is listed under its latest part's title."""

from __future__ import annotations

import importlib
import re

import pytest
from django.apps import apps

from sessions.content import title_from
from sessions.models import ChatSession

from .conftest import make_session
from .test_browse import hand_off

pytestmark = pytest.mark.django_db

MARKED = "how **handoff** works with `code`, _emphasis_, ~~old~~ and [the docs](https://x.test/d)"
PLAIN = "how handoff works with code, emphasis, old and the docs"


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def say(session: ChatSession, text: str, role: str = "user") -> None:
    session.append_message(role, [{"type": "text", "text": text}])


@pytest.mark.parametrize(
    ("first_line", "title"),
    [
        (MARKED, PLAIN),
        ("## Plan: **ship** it", "Plan: ship it"),
        ("- [ ] read `config_loader.py`", "read config_loader.py"),
        (
            "keep snake_case_names and 2*3*4 as written",
            "keep snake_case_names and 2*3*4 as written",
        ),
        ("![diagram](a.png) of the flow", "diagram of the flow"),
    ],
)
def test_a_title_cut_from_a_first_message_has_no_markdown_marks(first_line, title):
    assert title_from(first_line + "\nmore") == title


def test_the_heading_list_lineage_and_tree_show_the_title_without_marks(signed_in, owner):
    first = make_session(owner)
    say(first, MARKED)
    second = hand_off(first, "## Goal\nGo on")
    pages = [
        signed_in.get(f"/sessions/{first.pk}/").content.decode(),
        signed_in.get("/").content.decode(),
        signed_in.get(f"/sessions/{second.pk}/").content.decode(),
        signed_in.get(f"/sessions/{first.pk}/tree/").content.decode(),
    ]
    for page in pages:
        shown = re.sub(r"<textarea.*?</textarea>", "", page, flags=re.DOTALL)  # Edit's own box
        assert PLAIN in shown
        assert "**handoff**" not in shown and "`code`" not in shown
    assert f'<h1 id="session-title">{PLAIN}</h1>' in pages[0]
    assert f'Handed off from <a href="/sessions/{first.pk}/">{PLAIN} (#{first.pk})</a>' in pages[2]


def test_a_fork_is_titled_as_one_and_a_fork_of_a_fork_only_once(signed_in, owner):
    session = make_session(owner)
    say(session, "Parse the TOML config")
    say(session, "Use tomllib.", role="assistant")
    fork = session.fork(session.leaf_id)
    assert fork.title == "Fork of Parse the TOML config"
    assert session.fork(session.leaf_id).title == "Fork of Parse the TOML config"
    assert fork.fork(fork.leaf_id).title == "Fork of Parse the TOML config"
    listed = signed_in.get("/").content.decode()
    assert listed.count(">Parse the TOML config</a>") == 1
    assert listed.count(">Fork of Parse the TOML config</a>") == 3


def test_renaming_one_part_of_a_chain_renames_that_part_and_the_chain_shows_the_latest(
    signed_in, owner
):
    first = make_session(owner)
    say(first, "Migrate the billing service")
    second = hand_off(first, "## Goal\nGo on")
    third = hand_off(second, "## Goal\nGo on")
    signed_in.post(f"/sessions/{second.pk}/rename/", {"title": "Billing: the cut-over"})
    titles = dict(ChatSession.objects.values_list("pk", "title"))
    assert titles[first.pk] == titles[third.pk] == "Migrate the billing service"
    assert titles[second.pk] == "Billing: the cut-over"
    signed_in.post(f"/sessions/{third.pk}/rename/", {"title": "Billing: after the cut-over"})
    listed = signed_in.get("/").content.decode()
    assert (
        '<strong class="chain-title">Billing: after the cut-over</strong> · across 3 sessions'
        in (listed)
    )


def test_titles_written_before_keep_no_marks_and_old_forks_say_they_are_forks(owner):
    session = make_session(owner)
    say(session, "plain start")
    fork = session.fork(session.leaf_id)
    renamed = session.fork(session.leaf_id)
    ChatSession.objects.filter(pk=session.pk).update(title="how **handoff** works")
    ChatSession.objects.filter(pk=fork.pk).update(title="how **handoff** works")
    ChatSession.objects.filter(pk=renamed.pk).update(title="My own name")
    importlib.import_module("sessions.migrations.0018_plain_titles").clean(apps, None)
    titles = dict(ChatSession.objects.values_list("pk", "title"))
    assert titles == {
        session.pk: "how handoff works",
        fork.pk: "Fork of how handoff works",
        renamed.pk: "My own name",
    }


def test_a_handoff_request_never_titles_a_session(owner):
    from sessions import handoff

    session = make_session(owner)
    session.append_message(
        "user", [{"type": "text", "text": handoff.build_prompt()}], data={"purpose": "handoff"}
    )
    say(session, "Then fix the parser")
    assert ChatSession.objects.get(pk=session.pk).title == "Then fix the parser"
