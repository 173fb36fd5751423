"""The lineage map's rows (issue 19, item 6): handoffs and forks, top-down, the owner's only."""

from __future__ import annotations

import pytest

from sessions import handoff, lineage

from .conftest import make_session

pytestmark = pytest.mark.django_db


def hand_off(old):
    reply = old.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nGo on."}], data={"purpose": "handoff"}
    )
    return handoff.new_session(old, from_entry=reply, content=handoff.wrap("## Goal\nGo on."), data={})  # fmt: skip


def test_the_map_holds_the_whole_chain_and_its_forks_whichever_session_it_is_drawn_from(owner):
    first = make_session(owner, exchanges=1)
    second = hand_off(first)
    third = hand_off(second)
    fork = first.fork(first.leaf_id)
    for start in (first, second, third, fork):
        rows = lineage.map_of(start)
        assert [(row.session.pk, row.depth, row.came_by) for row in rows] == [
            (first.pk, 0, ""),
            (second.pk, 1, "handoff"),
            (third.pk, 2, "handoff"),
            (fork.pk, 1, "fork"),
        ]
        assert [row.session.pk for row in rows if row.current] == [start.pk]


def test_the_map_leaves_out_deleted_sessions_and_other_users(owner, other_user, client):
    first = make_session(owner, exchanges=1)
    second = hand_off(first)
    theirs = make_session(other_user, exchanges=1)
    second.soft_delete()
    assert [row.session.pk for row in lineage.map_of(first)] == [first.pk]
    client.force_login(owner)
    assert client.get(f"/sessions/{theirs.pk}/map/").status_code == 404
    page = client.get(f"/sessions/{first.pk}/map/").content.decode()
    assert 'aria-current="page"' in page and f"#{first.pk} · part 1" in page


def test_under_a_session_the_map_shows_the_sessions_it_mentions(owner):
    first = make_session(owner, exchanges=1)
    second = hand_off(first)
    elsewhere = make_session(owner, exchanges=1)
    second.append_message(
        "user",
        [{"type": "text", "text": f"see @#{elsewhere.pk}"}],
        data={"mentions": [{"session": elsewhere.pk, "title": "Elsewhere"}]},
    )
    rows = lineage.map_of(second)
    assert [(row.session.pk, row.depth, row.came_by) for row in rows] == [
        (first.pk, 0, ""),
        (second.pk, 1, "handoff"),
        (elsewhere.pk, 2, "mention"),
    ]
