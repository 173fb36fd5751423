"""Search (issue 11, item 4): over the words of entries, not their JSON, on SQLite (FTS5) and
PostgreSQL (full text) alike — CI runs this file on both. Results show a highlighted snippet
and jump to the entry, however old."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sessions import search, session_file
from sessions.models import Entry
from sessions.templatetags.agentweb import marked

from .conftest import make_session

pytestmark = pytest.mark.django_db


def say(session, text: str, role: str = "user") -> int:
    return session.append_message(role, [{"type": "text", "text": text}]).pk


def test_words_of_the_json_around_messages_find_nothing(client, owner):
    session = make_session(owner)
    say(session, "The build fails on the config loader")
    client.force_login(owner)
    assert search.find(owner, "type") == [] and search.find(owner, "text") == []
    assert "No session mentions “role”." in client.get("/?q=role").content.decode()
    assert [hit.session.pk for hit in search.find(owner, "config loader")] == [session.pk]


@pytest.mark.parametrize(
    ("written", "query"),
    [
        ("Die Größe der Datei ist falsch", "Größe"),
        ("Order a Café au lait", "CAFÉ"),
        ("我们使用数据库来保存会话", "数据库"),
        ("我们使用数据库来保存会话", "数据"),
        ("Shipped it 🎉 at last", "🎉"),
    ],
)
def test_text_in_any_script_is_found(owner, written, query):
    session = make_session(owner)
    say(session, "something else entirely")
    entry_id = say(session, written, role="assistant")
    hits = search.find(owner, query)
    assert [hit.entry_id for hit in hits] == [entry_id]
    assert f"<mark>{written[written.lower().index(query.lower()) :][: len(query)]}</mark>" in (
        marked(hits[0].snippet)
    )


def test_results_show_a_marked_snippet_of_the_words_around_the_match(client, owner):
    session = make_session(owner)
    say(session, "First, " + "filler " * 20 + "the <b>zanzibar</b> protocol times out " + "x " * 40)
    client.force_login(owner)
    page = client.get("/?q=zanzibar").content.decode()
    assert "Messages that mention “zanzibar”" in page
    assert "filler the &lt;b&gt;<mark>zanzibar</mark>&lt;/b&gt; protocol times out x x" in page
    assert "…" in page


def test_a_result_older_than_the_page_opens_the_conversation_around_it(client, owner):
    session = make_session(owner)
    old = say(session, "the flaky zanzibar test again")
    for i in range(450):
        say(session, f"later message {i}", role="user" if i % 2 else "assistant")
    client.force_login(owner)
    [hit] = search.find(owner, "zanzibar")
    assert hit.url == f"/sessions/{session.pk}/?at={old}#entry-{old}"
    assert f'id="entry-{old}"' not in client.get(f"/sessions/{session.pk}/").content.decode()
    around = client.get(f"/sessions/{session.pk}/?at={old}").content.decode()
    assert f'id="entry-{old}"' in around
    assert "351 newer entries are not shown" in around  # 451 entries, shown up to 100


def test_a_result_on_another_branch_offers_to_switch_to_it(client, owner):
    session = make_session(owner)
    question = say(session, "How do I parse TOML?")
    hit = say(session, "Use the zanzibar parser.", role="assistant")
    session.move_leaf(question)  # regenerated: the session goes on from another answer
    say(session, "Use tomllib.", role="assistant")
    client.force_login(owner)
    [found] = search.find(owner, "zanzibar")
    page = client.get(found.url.split("#")[0]).content.decode()
    assert "The message you chose is on another branch of this session." in page
    assert f'id="entry-{hit}"' not in page
    switched = client.post(f"/sessions/{session.pk}/branch/", {"entry": hit}, follow=True)
    assert switched.redirect_chain[-1][0] == f"/sessions/{session.pk}/?at={hit}#entry-{hit}"
    page = switched.content.decode()
    assert f'id="entry-{hit}"' in page
    assert "on another branch" not in page


def test_imported_entries_are_searchable_and_other_users_entries_are_not(owner, django_user_model):
    lines = [
        {"type": "session", "version": 3, "id": "s"},
        {"type": "message", "id": "a", "parentId": None,
         "message": {"role": "user", "content": [{"type": "text", "text": "imported quokka"}]}},
    ]  # fmt: skip
    session_file.import_jsonl(owner, [json.dumps(line) for line in lines])
    stranger = django_user_model.objects.create_user("stranger")
    say(make_session(stranger), "a quokka of my own")
    hits = search.find(owner, "quokka")
    assert [hit.session.owner_id for hit in hits] == [owner.pk]


@pytest.mark.parametrize(
    ("typed", "searched"), [("%00abc", "abc"), ("abc%00", "abc"), ("ab%01c%7F", "abc")]
)
def test_characters_no_database_can_match_are_left_out_of_the_query(client, owner, typed, searched):
    session = make_session(owner)
    say(session, "the abc of it", role="assistant")
    client.force_login(owner)
    page = client.get(f"/?q={typed}")
    assert page.status_code == 200
    assert f"Messages that mention “{searched}”" in page.content.decode()


def test_a_query_of_nul_alone_is_no_query(client, owner):
    make_session(owner)
    client.force_login(owner)
    page = client.get("/?q=%00")
    assert page.status_code == 200 and "Messages that mention" not in page.content.decode()


@pytest.mark.parametrize(
    ("written", "query", "shown"),
    [
        ("Sent my résumé to the team", "resume", "résumé"),
        ("Order a Café au lait", "cafe", "Café"),
        ("Order a cafe au lait", "CAFÉ", "cafe"),
        ("Measured in Ångström units", "angstrom", "Ångström"),
        ("Naïve Bayes, again", "naive bay", "Naïve Bay"),
        ("Sent my résumé to the team", "resu", "résu"),
    ],
)
def test_search_ignores_accents_and_case(owner, written, query, shown):
    session = make_session(owner)
    say(session, "something else entirely")
    entry_id = say(session, written, role="assistant")
    hits = search.find(owner, query)
    assert [hit.entry_id for hit in hits] == [entry_id]
    assert f"<mark>{shown}</mark>" in marked(hits[0].snippet)


def test_the_session_list_finds_a_session_by_words_without_their_accents(client, owner):
    session = make_session(owner)
    say(session, "The café opens at nine")
    client.force_login(owner)
    page = client.get("/?q=cafe").content.decode()
    assert f'href="/sessions/{session.pk}/' in page
    assert "<mark>café</mark>" in page


def test_a_title_is_found_without_its_accents(client, owner):
    session = make_session(owner)
    session.rename("Résumé for the Café")
    client.force_login(owner)
    page = client.get("/?q=resume+for+the+cafe").content.decode()
    assert "Résumé for the Café</a>" in page
    assert "No session mentions" not in page


def test_a_substring_is_found_through_an_index_not_by_reading_every_users_entries(
    owner, django_user_model
):
    """A substring (ILIKE on PostgreSQL) had no index there: every search read every entry of
    every user, 180 ms behind 134,000 entries. Both databases now answer it from a trigram
    index: PostgreSQL's pg_trgm, SQLite's FTS5."""
    other = make_session(django_user_model.objects.create_user("other", password="x"))
    for n in range(30):
        say(other, f"someone else's words {n}")
    session = make_session(owner)
    entry_id = say(session, "我们使用数据库来保存会话")
    found = search.matching_entries(owner, "使用数据")
    if connection.vendor == "postgresql":  # tables this small are read whole, index or none
        with connection.cursor() as cursor:  # nor walked in id order, nor through the owner's
            for plan in ("seqscan", "indexscan", "nestloop"):
                cursor.execute(f"SET LOCAL enable_{plan} = off")
    index = (
        "chat_entry_search_substrings" if connection.vendor == "postgresql" else "chat_entry_fts"
    )
    assert index in found.explain()
    assert [entry.pk for entry in found] == [entry_id]


def test_results_are_newest_first_by_when_they_were_said_an_imported_entry_by_its_own_date(
    owner,
):
    """An imported session's entries keep their dates: one said last year ranks below one said
    today, though it was stored after it."""
    today = say(make_session(owner), "the zanzibar protocol, today")
    imported = say(make_session(owner), "the zanzibar protocol, last year")
    Entry.objects.filter(pk=imported).update(created_at=timezone.now() - timedelta(days=365))
    assert [hit.entry_id for hit in search.find(owner, "zanzibar")] == [today, imported]


# Search by words (issue 54, item 5): every word, in any order; phrases in quotes; ranked.

BUDGET = "The quarterly budget review for the Lisbon office moves to Thursday"


@pytest.mark.parametrize(
    "query", ["lisbon budget", "BUDGET lisbon", "office quarterly", "review Lisb"]
)
def test_every_word_is_found_in_any_order(owner, query):
    session = make_session(owner)
    say(session, "The Lisbon office has a new address")  # one of the words only
    entry_id = say(session, BUDGET)
    assert [hit.entry_id for hit in search.find(owner, query)] == [entry_id]


def test_accents_and_case_do_not_matter_to_the_words(owner):
    session = make_session(owner)
    entry_id = say(session, "Le Café de Flore wants my résumé by Friday")
    say(session, "A cafe with no paperwork")
    assert [hit.entry_id for hit in search.find(owner, "cafe resume")] == [entry_id]
    assert [hit.entry_id for hit in search.find(owner, "RÉSUMÉ café")] == [entry_id]


def test_a_quoted_phrase_must_stand_together_in_its_order(owner):
    session = make_session(owner)
    together = say(session, "Start the budget review at nine")
    apart = say(session, "Review the budget at nine")
    assert {hit.entry_id for hit in search.find(owner, "budget review")} == {together, apart}
    assert [hit.entry_id for hit in search.find(owner, '"budget review"')] == [together]
    assert [hit.entry_id for hit in search.find(owner, '"budget review" nine')] == [together]
    assert search.find(owner, '"review budget" friday') == []


def test_words_joined_by_signs_are_found_as_a_phrase(owner):
    session = make_session(owner)
    entry_id = say(session, "Run the e2e-tests before each commit")
    say(session, "Tests first, e2e later")
    assert [hit.entry_id for hit in search.find(owner, "e2e-tests")] == [entry_id]


def test_results_are_ranked_by_relevance_then_by_recency(owner):
    session = make_session(owner)
    relevant = say(session, "Marigold Bistro: lunch at Marigold Bistro, then Marigold Bistro again")
    say(session, "Other words entirely")
    passing = say(session, "Marigold mentioned the bistro once, in a long message " + "x " * 40)
    same = say(session, "Marigold Bistro: lunch at Marigold Bistro, then Marigold Bistro again")
    hits = [hit.entry_id for hit in search.find(owner, "marigold bistro")]
    # The two that say it three times first (the newer of them first), then the one in passing.
    assert hits == [same, relevant, passing]


def test_another_users_words_and_a_deleted_sessions_are_never_found(owner, django_user_model):
    theirs = make_session(django_user_model.objects.create_user("them", password="x"))
    say(theirs, BUDGET)
    deleted = make_session(owner)
    say(deleted, BUDGET)
    deleted.soft_delete()
    entry_id = say(make_session(owner), BUDGET)
    assert [hit.entry_id for hit in search.find(owner, "lisbon budget")] == [entry_id]


def test_the_session_list_finds_a_session_by_words_in_any_order(client, owner):
    session = make_session(owner)
    say(session, BUDGET)
    client.force_login(owner)
    page = client.get("/?q=lisbon+budget").content.decode()
    assert f'href="/sessions/{session.pk}/' in page
    assert "No session mentions" not in page
