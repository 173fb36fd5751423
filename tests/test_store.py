"""The session manager: the branch, appending, context building, at scale."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sessions import context, store
from sessions.models import Entry

from .conftest import make_session

pytestmark = pytest.mark.django_db


def test_the_branch_runs_from_the_root_to_the_leaf(owner):
    session = make_session(owner, exchanges=2)
    texts = [entry.text for entry in store.get_branch(session)]
    assert texts == ["question 0", "answer 0", "question 1", "answer 1"]


def test_the_branch_follows_the_leaf_not_insertion_order(owner):
    session = make_session(owner, exchanges=1)
    first_answer = store.get_branch(session)[-1]
    session.append_message("user", [{"type": "text", "text": "abandoned"}])
    # Move the leaf back and branch off from the first answer.
    session.leaf = first_answer
    session.save(update_fields=["leaf"])
    session.append_message("user", [{"type": "text", "text": "taken"}])
    assert [e.text for e in store.get_branch(session)] == ["question 0", "answer 0", "taken"]


def test_appending_inside_a_transaction_sends_no_savepoint(owner):
    """The prompt path appends inside its own transaction: a savepoint there is two statements
    for nothing."""
    session = make_session(owner, exchanges=1)
    with transaction.atomic(), CaptureQueriesContext(connection) as sent:
        session.append_message("user", [{"type": "text", "text": "one more"}])
    assert [query["sql"] for query in sent if "SAVEPOINT" in query["sql"].upper()] == []
    assert store.get_branch(session)[-1].text == "one more"


def test_an_empty_session_has_an_empty_branch_and_context(owner):
    session = make_session(owner)
    assert store.get_branch(session) == []
    assert store.session_context(session) == []


def test_a_custom_message_reaches_the_model_as_a_user_message(owner):
    session = make_session(owner)
    session.append_custom_message("handoff", "the document")
    session.append_message("assistant", [{"type": "text", "text": "ok"}])
    assert store.session_context(session) == [
        {"role": "user", "content": [{"type": "text", "text": "the document"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]


def test_context_joins_consecutive_messages_of_one_role_and_skips_empty_ones(owner):
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "one"}])
    session.append_message("assistant", [], status=Entry.Status.ABORTED)
    session.append_message("user", [{"type": "text", "text": "two"}])
    assert store.session_context(session) == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]


def test_an_image_reaches_the_model_as_a_placeholder_and_a_label_not_at_all(owner):
    session = make_session(owner)
    session.append_message(
        "user",
        [{"type": "image", "data": "…", "mimeType": "image/png"}, {"type": "text", "text": "look"}],
    )
    session.append(kind=Entry.Kind.LABEL, data={"label": "x"})
    assert store.session_context(session) == [
        {"role": "user", "content": [{"type": "text", "text": "[image: image/png]\nlook"}]}
    ]


def test_the_first_line_of_the_first_user_message_titles_the_session(owner):
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "\nFix the  login bug\nDetails"}])
    session.append_message("user", [{"type": "text", "text": "Another"}])
    session.refresh_from_db()
    assert session.title == "Fix the login bug"


def test_a_branch_of_ten_thousand_entries_costs_a_bounded_number_of_queries(
    owner, django_assert_max_num_queries
):
    session = make_session(owner)
    rows = []
    for i in range(10_000):
        rows.append(
            Entry(
                session=session,
                kind=Entry.Kind.MESSAGE,
                role="user" if i % 2 == 0 else "assistant",
                content=[{"type": "text", "text": f"message {i}"}],
            )
        )
    Entry.objects.bulk_create(rows)
    ids = list(Entry.objects.filter(session=session).order_by("id").values_list("id", flat=True))
    with connection.cursor() as cursor:
        cursor.executemany(
            "UPDATE chat_entry SET parent_id = %s WHERE id = %s",
            [(parent_id, entry_id) for parent_id, entry_id in zip(ids, ids[1:], strict=False)],
        )
    session.leaf_id = ids[-1]
    session.save(update_fields=["leaf"])

    with django_assert_max_num_queries(2):
        branch = store.get_branch(session)
        messages = context.build_context(branch)
    assert len(branch) == 10_000
    assert len(messages) == 10_000
    assert messages[-1]["content"][0]["text"] == "message 9999"
