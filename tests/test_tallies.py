"""What a session's entries add up to (its cost, the sessions it mentions, its todo list) is
kept by the process and read again only from the entries written since: the answers are the
ones a fresh read of every entry gives, whatever was written between two reads."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions import mentions, todos, usage
from sessions.listing import MESSAGES
from sessions.tallies import reading_ahead, reading_ahead_of_many
from sessions.todos import Todo

from .conftest import make_session

pytestmark = pytest.mark.django_db

SONNET = "claude-sonnet-4-5"


def forget_everything() -> None:
    """As a process that has read nothing yet."""
    for tally in (usage.SUMMED, mentions.MENTIONED, todos.CHANGED):
        tally.forget()


def said(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def test_a_mention_written_after_many_plain_entries_is_found_and_kept(owner):
    other = make_session(owner)
    session = make_session(owner, exchanges=3)
    assert mentions.mentioned_by(session) == []
    session.append_message("user", said("more"))  # read past: nothing in it
    assert mentions.mentioned_by(session) == []
    session.append_message("user", said("see"), data={"mentions": [{"session": other.pk}]})
    session.append_message("assistant", said("ok"))
    assert mentions.mentioned_by(session) == [other.pk]
    assert mentions.mentioned_by(session) == [other.pk]  # nothing new: the same
    forget_everything()
    assert mentions.mentioned_by(session) == [other.pk]


def test_the_todo_list_set_after_a_read_is_the_list(owner):
    session = make_session(owner, exchanges=2)
    assert todos.state(session).todos == []
    todos.append_list(session, [Todo("First")], "user")
    session.append_message("user", said("go on"))
    assert todos.state(session).todos == [Todo("First")]
    todos.append_list(session, [Todo("Second")], "user")
    assert todos.state(session).todos == [Todo("Second")]
    forget_everything()
    assert todos.state(session).todos == [Todo("Second")]


def test_a_cost_counts_the_replies_written_between_reads_and_only_its_own(owner):
    session, other = make_session(owner), make_session(owner)
    session.append_message("assistant", said("a"), model=SONNET, input_tokens=100, output_tokens=1)
    assert usage.of_session(session) == usage.priced(SONNET, 100, 1)
    session.append_message("user", said("q"))  # not a reply: costs nothing, read past
    other.append_message("assistant", said("b"), model=SONNET, input_tokens=5, output_tokens=5)
    assert usage.of_session(session) == usage.priced(SONNET, 100, 1)
    session.append_message("assistant", said("c"), model=SONNET, input_tokens=20, output_tokens=2)
    assert usage.of_session(session) == usage.priced(SONNET, 120, 3)
    forget_everything()
    assert usage.of_session(session) == usage.priced(SONNET, 120, 3)


def test_tallies_read_ahead_together_give_what_each_reads_alone(owner):
    other = make_session(owner)
    session = make_session(owner, exchanges=2)
    assert (usage.of_session(session), todos.state(session).todos) == (usage.Usage(), [])
    session.append_message("assistant", said("a"), model=SONNET, input_tokens=100, output_tokens=1)
    todos.append_list(session, [Todo("First")], "user")
    session.append_message("user", said("see"), data={"mentions": [{"session": other.pk}]})
    with reading_ahead(session, usage.SUMMED, todos.CHANGED, mentions.MENTIONED):
        ahead = (usage.of_session(session), todos.state(session).todos)
        session.append_message("assistant", said("b"), model=SONNET, input_tokens=5)
        ahead += (mentions.mentioned_by(session),)  # as of the block's start
    assert ahead == (usage.priced(SONNET, 100, 1), [Todo("First")], [other.pk])
    assert usage.of_session(session) == usage.priced(SONNET, 105, 1)  # read on after it
    forget_everything()
    assert usage.of_session(session) == usage.priced(SONNET, 105, 1)
    assert (todos.state(session).todos, mentions.mentioned_by(session)) == (
        [Todo("First")],
        [other.pk],
    )


def test_a_tally_that_moved_on_before_its_read_ahead_is_taken_reads_again(owner):
    session = make_session(owner)
    session.append_message("assistant", said("a"), model=SONNET, input_tokens=7)
    assert usage.of_session(session) == usage.priced(SONNET, 7, 0)
    session.append_message("assistant", said("b"), model=SONNET, input_tokens=5)
    with reading_ahead(session, usage.SUMMED):  # the reply after the first, read ahead
        usage.SUMMED.forget()  # another thread's doing: the tally starts again
        assert usage.of_session(session) == usage.priced(SONNET, 12, 0)


def test_many_sessions_read_ahead_together_give_what_each_reads_alone(owner):
    """The session list's counts: one statement a tally for every session listed."""
    sessions = [make_session(owner, exchanges=n) for n in (1, 2, 3)]
    assert MESSAGES.of(sessions[0]) == 2  # this one counted once already, the others not
    for session in sessions:
        session.append_message("assistant", said("a"), model=SONNET, input_tokens=10)
    with (
        CaptureQueriesContext(connection) as sent,
        reading_ahead_of_many(sessions, MESSAGES, usage.SUMMED),
    ):
        ahead = [(MESSAGES.of(s), usage.of_session(s)) for s in sessions]
    reads = [q["sql"] for q in sent.captured_queries if "chat_entry" in q["sql"]]
    assert len(reads) == 2
    assert ahead == [(n, usage.priced(SONNET, 10, 0)) for n in (3, 5, 7)]
    MESSAGES.forget()
    forget_everything()
    assert [(MESSAGES.of(s), usage.of_session(s)) for s in sessions] == ahead
