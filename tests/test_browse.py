"""Browsing sessions: chains of handoffs, filter, pages, rename, side by side with coverage."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from sessions import handoff, listing, store
from sessions.models import ChatSession, Entry

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def hand_off(old: ChatSession, document: str) -> ChatSession:
    old.append_message(
        "user", [{"type": "text", "text": handoff.build_prompt()}], data={"purpose": "handoff"}
    )
    reply = old.append_message(
        "assistant", [{"type": "text", "text": document}], data={"purpose": "handoff"}
    )
    return handoff.new_session(
        old, from_entry=reply, content=handoff.wrap(document), data={"warnings": []}
    )


def chain_of_four(owner) -> list[ChatSession]:
    first = make_session(owner, exchanges=1)
    first.append_message(
        "user",
        [{"type": "text", "text": "Fix src/app/views.py and keep TIMEOUT_SECONDS at 30 s"}],
    )
    sessions = [first]
    for n in range(3):
        nxt = hand_off(sessions[-1], f"## Goal\nStep {n}: src/app/views.py")
        nxt.append_message("user", [{"type": "text", "text": f"message in session {n + 2}"}])
        sessions.append(nxt)
    return sessions


def rows(html: str) -> list[str]:
    return re.findall(
        r'<li class="session-row[^"]*">\s*<span class="session-title">(?:<span class="badge">\w+</span> )*<a href="/sessions/(\d+)/"',
        html,
    )


def test_a_chain_of_handoffs_is_one_group_from_root_to_newest(signed_in, owner):
    alone = make_session(owner, exchanges=1)
    chain = chain_of_four(owner)
    html = signed_in.get("/").content.decode()
    assert "· across 4 sessions" in html
    ids = rows(html)
    # The chain was active last, so it comes first, root to newest; then the lone session.
    assert ids == [str(s.pk) for s in chain] + [str(alone.pk)]
    assert chain[1].chain_root_id == chain[3].chain_root_id == chain[0].pk


def test_each_row_shows_messages_context_and_lineage(signed_in, owner):
    chain = chain_of_four(owner)
    ChatSession.objects.filter(pk=chain[0].pk).update(context_tokens=12345)
    html = signed_in.get("/").content.decode()
    assert "5 messages · 12,345 context tokens" in html  # 2 + 1 + the handoff prompt and document
    assert f"handed off from #{chain[0].pk}" in html
    assert reverse("chat:compare", args=[chain[0].pk, chain[1].pk]) in html


def test_the_filter_finds_sessions_by_title_or_content_and_keeps_their_chain(
    signed_in, owner, other_user
):
    chain = chain_of_four(owner)
    make_session(owner, exchanges=1)
    theirs = make_session(other_user)
    theirs.append_message("user", [{"type": "text", "text": "message in session 3"}])
    html = signed_in.get("/", {"q": "MESSAGE IN SESSION 3"}).content.decode()
    assert rows(html) == [str(s.pk) for s in chain]
    assert html.count("session-row matched") == 1
    ChatSession.objects.filter(pk=chain[0].pk).update(title="Zebra crossing")
    assert rows(signed_in.get("/", {"q": "zebra"}).content.decode()) == [str(s.pk) for s in chain]
    assert "No session mentions" in signed_in.get("/", {"q": "nothing like this"}).content.decode()


def test_the_list_is_paginated_by_chains(signed_in, owner):
    for _ in range(45):
        make_session(owner, exchanges=1)
    first = signed_in.get("/").content.decode()
    third = signed_in.get("/", {"page": 3}).content.decode()
    assert len(rows(first)) == 20 and len(rows(third)) == 5
    assert "Page 1 of 3" in first and 'href="?page=2"' in first


def test_two_thousand_sessions_list_in_a_bounded_number_of_queries(
    signed_in, owner, django_assert_max_num_queries
):
    ChatSession.objects.bulk_create(
        ChatSession(owner=owner, model="local", title=f"s{i}") for i in range(2000)
    )
    roots = list(ChatSession.objects.filter(owner=owner).order_by("pk")[:100])
    ChatSession.objects.bulk_create(
        ChatSession(owner=owner, model="local", parent_session=r, chain_root=r) for r in roots
    )
    # The page, the purge, archived and deleted; the new entries of the sessions listed,
    # counted (two, and on PostgreSQL in a transaction that plans them without workers).
    with django_assert_max_num_queries(13):
        response = signed_in.get("/")
    assert response.status_code == 200 and len(rows(response.content.decode())) >= 20


def test_a_session_can_be_renamed(signed_in, owner):
    session = make_session(owner, exchanges=1)
    signed_in.post(reverse("chat:rename", args=[session.pk]), {"title": "  Parser work  "})
    session.refresh_from_db()
    assert session.title == "Parser work"
    assert (
        signed_in.post(reverse("chat:rename", args=[session.pk]), {"title": ""}).status_code == 302
    )
    session.refresh_from_db()
    assert session.title == "Parser work"


def test_renaming_another_users_session_is_not_found(signed_in, other_user):
    theirs = make_session(other_user)
    assert (
        signed_in.post(reverse("chat:rename", args=[theirs.pk]), {"title": "x"}).status_code == 404
    )


def a_parser_error(owner) -> ChatSession:
    """A session where the user names a file and its error, and the reply a timing."""
    old = make_session(owner)
    old.append_message(
        "user",
        [{"type": "text", "text": "Edit src/parser.py; it fails with ValueError: bad header"}],
    )
    old.append_message("assistant", [{"type": "text", "text": "Reading takes 850 ms."}])
    return old


PARSER_DOCUMENT = "## Critical Context\n- src/parser.py raises ValueError (bad header)"


def test_side_by_side_highlights_the_document_and_the_seed_and_shows_coverage(signed_in, owner):
    old = a_parser_error(owner)
    new = hand_off(old, PARSER_DOCUMENT)
    html = signed_in.get(reverse("chat:compare", args=[new.pk, old.pk])).content.decode()
    assert html.index(f'Old: <a href="/sessions/{old.pk}/"') < html.index(
        f'New: <a href="/sessions/{new.pk}/"'
    )
    assert html.count("handoff-focus") == 2
    assert (
        f'<div class="compare-entry handoff-focus" data-focus>\n  <article id="entry-{new.handed_off_from_id}"'
        in html
    )
    assert "What the handoff carried" in html
    # Saliences: the error 5.96 (user 3, recency 0.46 halfway, error 1.5, kind 1), src/parser.py
    # 3.46, "850 ms" 2.5 (assistant 1.5, recency 1.5, a number -0.5). Weighted by (s - 3)²: the
    # number, seen in passing, counts for nothing.
    assert "<strong>100%</strong>" in html
    assert "<strong>1 of 1</strong> salient items" in html and "(2 of 3 items in all)" in html
    assert "salient items not carried" not in html  # none: the fold is not there
    below = html.split("<h3>Below the salient bar, most salient first: not carried</h3>")[1]
    below = below.split("</ol>")[0]
    assert "<code>850 ms</code>" in below
    assert "— recent; last seen in an assistant reply, entry 2 of 4" in below


def test_side_by_side_counts_entries_written_before_their_items_were_kept(signed_in, owner):
    old = a_parser_error(owner)
    Entry.objects.filter(session=old).update(items=None)  # as rows of an older agentweb
    new = hand_off(old, PARSER_DOCUMENT)
    html = signed_in.get(reverse("chat:compare", args=[new.pk, old.pk])).content.decode()
    assert "<strong>1 of 1</strong> salient items" in html and "(2 of 3 items in all)" in html
    assert "<code>850 ms</code>" in html


def test_the_panel_lists_exactly_the_salient_items_its_figure_counts_as_not_carried(
    signed_in, owner
):
    old = make_session(owner)
    for text in (
        "Edit src/parser.py; it fails with ValueError: bad header",
        "Then fix src/lexer.py, which raises KeyError: 'token'",
        "Keep src/parser.py and src/lexer.py on Python 3.12",
    ):
        old.append_message("user", [{"type": "text", "text": text}])
        old.append_message("assistant", [{"type": "text", "text": "Noted."}])
    new = hand_off(old, "## Critical Context\n- src/parser.py raises ValueError: bad header")
    html = signed_in.get(reverse("chat:compare", args=[new.pk, old.pk])).content.decode()
    assert "<strong>2 of 4</strong> salient items" in html
    assert (
        '<strong class="not-carried-count">2 salient items not carried by the model</strong>'
        in html
    )
    missing = html.split('<details class="coverage-missing">')[1].split("</details>")[0]
    assert re.findall(r"<code>([^<]*)</code>", missing) == [
        "KeyError: &#x27;token&#x27;",
        "src/lexer.py",
    ]
    assert html.index("coverage-missing") < html.index('<section class="compare-column"')
    assert "<details open" not in html  # folded: both columns start on the first screen


def test_any_two_sessions_of_a_chain_can_be_compared(signed_in, owner):
    chain = chain_of_four(owner)
    html = signed_in.get(reverse("chat:compare", args=[chain[0].pk, chain[3].pk])).content.decode()
    assert f'<option value="{chain[2].pk}"' in html  # the chooser offers the whole chain
    # The first session's document is the one its direct successor came from.
    assert f'<article id="entry-{chain[1].handed_off_from_id}"' in html.split("handoff-focus")[1]
    response = signed_in.get(
        reverse("chat:compare_choice"), {"left": chain[1].pk, "right": chain[2].pk}
    )
    assert response["Location"] == reverse("chat:compare", args=[chain[1].pk, chain[2].pk])


def test_entries_of_kinds_agentweb_does_not_run_are_shown_compactly(signed_in, owner):
    session = make_session(owner, exchanges=1)
    session.append(kind=Entry.Kind.MODEL_CHANGE, data={"fields": {"modelId": "x"}})
    assert signed_in.get(session.get_absolute_url()).status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        {"left": "-1", "right": "2"},
        {"left": "1"},
        {"left": "x", "right": "2"},
        {"left": "1", "right": "9" * 30},
    ],
)
def test_the_chooser_refuses_ids_that_are_not_sessions_with_a_message(signed_in, query):
    response = signed_in.get(reverse("chat:compare_choice"), query, follow=True)
    assert response.status_code == 200
    assert "Choose two sessions to compare." in response.content.decode()


def test_compare_ends_when_a_parent_lies_outside_the_chain(signed_in, owner):
    chain = chain_of_four(owner)
    # After an admin's deletions, two sessions of the chain have a parent outside it.
    stranger = make_session(owner)
    ChatSession.objects.filter(pk__in=[chain[1].pk, chain[2].pk]).update(parent_session=stranger)
    response = signed_in.get(reverse("chat:compare", args=[chain[1].pk, chain[3].pk]))
    assert response.status_code == 200


def test_a_report_another_request_is_working_out_is_not_worked_out_twice(signed_in, owner):
    from django.core.cache import cache

    old = make_session(owner, exchanges=1)
    new = hand_off(old, "## Goal\nShip.")
    old.refresh_from_db()
    seed = store.get_branch(new)[0]
    cache.add(f"coverage:{old.pk}:{old.leaf_id}:{seed.pk}:busy", True)  # another request's mark
    html = signed_in.get(reverse("chat:compare", args=[old.pk, new.pk])).content.decode()
    assert "The coverage of this handoff is being worked out: reload in a moment." in html
    assert "What the handoff carried" not in html


def test_side_by_side_shows_a_window_of_each_transcript_around_the_handoff(signed_in, owner):
    old = make_session(owner)
    for i in range(300):  # 600 entries before the handoff
        old.append_message("user", [{"type": "text", "text": f"q{i}"}])
        old.append_message("assistant", [{"type": "text", "text": f"a{i}"}])
    new = hand_off(old, "## Goal\nShip.")
    for i in range(150):  # 300 entries after the seed
        new.append_message("user", [{"type": "text", "text": f"n{i}"}])
        new.append_message("assistant", [{"type": "text", "text": f"m{i}"}])
    html = signed_in.get(reverse("chat:compare", args=[old.pk, new.pk])).content.decode()
    old_column, new_column = html.split('id="column-new"')
    assert old_column.count('<article id="entry-') == 200  # ending at the document
    assert "Show 402 earlier entries" in old_column and ">Handoff document" in old_column
    assert new_column.count('<article id="entry-') == 200  # from the seed on
    assert "New session started with handoff context" in new_column
    assert "101 later entries: open the session" in new_column


def test_the_list_counts_each_sessions_messages_and_tokens_as_they_grow(owner):
    """Counted by the process and brought up to date from the entries written since, by this
    process or another: a page of long sessions no longer reads every entry of each."""
    session = make_session(owner, exchanges=2)
    session.append_custom("note", "a note is not a message")

    def listed() -> tuple[int, int]:
        _, chains = listing.chain_page(owner)
        (chain,) = chains
        (shown,) = chain.sessions
        return shown.messages, chain.used[shown.pk].tokens

    assert listed() == (4, 0)
    session.append_message(
        "assistant", [{"type": "text", "text": "paid for"}], model="claude-sonnet-4-5", input_tokens=100,
        output_tokens=20,
    )  # fmt: skip
    assert listed() == (5, 120)
    ChatSession.objects.get(pk=session.pk).append_message("user", [{"type": "text", "text": "x"}])
    assert listed() == (6, 120)  # written through another object, as another process would
