"""Statements compiled once: what they give is what the queryset gives, with new values each
run, on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.db.models import BooleanField, Exists, F, OuterRef
from django.db.models.signals import post_save, pre_save
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessions import sign_ins, status
from sessions.generation.turns import next_turn, queue_prompt
from sessions.models import ChatSession, Entry, PendingPrompt, Preferences
from sessions.models.appending import Insert
from sessions.statements import Returning, Statement, Update, sent_together

from . import round_trips
from . import test_structure as structure
from .conftest import FAKE_MODEL, make_session

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_rows_are_the_querysets_rows_converted_as_it_converts_them(owner):
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "hi"}], data={"mentions": [[7, "x"]]})
    ChatSession.objects.filter(pk=session.pk).update(generation_started_at=NOON)
    columns = ("generation_started_at", "leaf__data", "building")
    reads = Statement(
        lambda session_id: ChatSession.objects.filter(pk=session_id).values_list(*columns),
        columns={"leaf__data": Entry._meta.get_field("data")},  # another table's: named
        session_id=int,
    )
    assert reads.rows(session_id=session.pk) == [(NOON, {"mentions": [[7, "x"]]}, False)]
    assert reads.rows(session_id=session.pk) == list(
        ChatSession.objects.filter(pk=session.pk).values_list(*columns)
    )
    assert reads.first(session_id=session.pk + 1000) is None


def test_each_run_takes_its_own_values_in_every_place_a_parameter_is_used(owner):
    older, newer = make_session(owner), make_session(owner)
    ChatSession.objects.filter(pk=older.pk).update(updated_at=NOON - timedelta(hours=2))
    ChatSession.objects.filter(pk=newer.pk).update(updated_at=NOON)
    since = Statement(
        lambda owner_id, after: (
            ChatSession.objects.filter(owner_id=owner_id, updated_at__gt=after)
            .filter(updated_at__gte=after)  # `after` twice: both places take the run's value
            .order_by("pk")
            .values_list("pk")
        ),
        owner_id=int,
        after=datetime,
    )
    assert since.rows(owner_id=owner.pk, after=NOON - timedelta(hours=3)) == [
        (older.pk,),
        (newer.pk,),
    ]
    assert since.rows(owner_id=owner.pk, after=NOON - timedelta(hours=1)) == [(newer.pk,)]
    assert since.rows(owner_id=owner.pk + 1, after=NOON - timedelta(hours=3)) == []


def test_model_instances_carry_every_column_and_the_annotations(owner):
    session = make_session(owner)
    PendingPrompt.objects.create(session=session, text="waiting")
    claimed = Statement(
        lambda session_id: ChatSession.objects.annotate(
            queued=Exists(PendingPrompt.objects.filter(session_id=OuterRef("pk"))),
            owner_name=F("owner__username"),
        ).filter(pk=session_id),
        session_id=int,
    )
    (read,) = claimed.objects(session_id=session.pk)
    fresh = ChatSession.objects.get(pk=session.pk)
    for field in ChatSession._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(fresh, field.attname), field.name
    assert (read.queued, read.owner_name) == (True, owner.username)
    assert read._state.adding is False  # a saved row, as the ORM makes it
    assert claimed.objects(session_id=session.pk + 1000) == []


def test_an_update_changes_the_rows_it_names_and_counts_them(owner):
    free, held = make_session(owner), make_session(owner)
    ChatSession.objects.filter(pk=held.pk).update(generation_id="someone else's")
    take = Update(
        lambda session_id, generation_id, now: (
            ChatSession.objects.filter(pk=session_id, generation_id=""),
            {"generation_id": generation_id, "generation_started_at": now},
        ),
        session_id=int,
        generation_id=str,
        now=datetime,
    )
    assert take.execute(session_id=free.pk, generation_id="mine", now=NOON) == 1
    assert take.execute(session_id=held.pk, generation_id="mine", now=NOON) == 0
    rows = ChatSession.objects.order_by("pk").values_list("generation_id", "generation_started_at")
    assert list(rows) == [("mine", NOON), ("someone else's", None)]


def test_an_update_returning_gives_the_rows_it_changed_as_the_read_reads_them_after(owner):
    free, held = make_session(owner), make_session(owner)
    PendingPrompt.objects.create(session=free, text="waiting")
    ChatSession.objects.filter(pk=held.pk).update(generation_id="someone else's")
    take = Returning(
        lambda session_id, generation_id, now: (
            ChatSession.objects.filter(pk=session_id, generation_id=""),
            {"generation_id": generation_id, "generation_started_at": now},
        ),
        lambda session_id, **_: ChatSession.objects.annotate(
            queued=Exists(PendingPrompt.objects.filter(session_id=OuterRef("pk")))
        ).filter(pk=session_id),
        columns={"queued": BooleanField()},  # an annotation's field (SQLite gives 0 or 1)
        session_id=int,
        generation_id=str,
        now=datetime,
    )
    assert take.objects(session_id=held.pk, generation_id="mine", now=NOON) == []  # not free
    with CaptureQueriesContext(connection) as sent:
        (taken,) = take.objects(session_id=free.pk, generation_id="mine", now=NOON)
    assert len(sent.captured_queries) == 1
    assert (taken.pk, taken.generation_id, taken.generation_started_at) == (free.pk, "mine", NOON)
    assert taken.queued is True
    fresh = ChatSession.objects.get(pk=free.pk)
    for field in ChatSession._meta.concrete_fields:
        assert getattr(taken, field.attname) == getattr(fresh, field.attname), field.name
    assert take.objects(session_id=held.pk, generation_id="mine", now=NOON) == []
    assert ChatSession.objects.get(pk=held.pk).generation_id == "someone else's"


def test_an_update_returning_refuses_a_read_that_joins_another_table(owner):
    session = make_session(owner)
    joined = Returning(
        lambda session_id: (ChatSession.objects.filter(pk=session_id), {"title": "x"}),
        lambda session_id: ChatSession.objects.annotate(name=F("owner__username")),
        session_id=int,
    )
    with pytest.raises(ValueError, match="no joins"):
        joined.objects(session_id=session.pk)
    assert ChatSession.objects.get(pk=session.pk).title == ""


def test_an_update_may_set_a_column_from_itself(owner):
    session = make_session(owner)
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=100)
    grow = Update(
        lambda session_id, tokens: (
            ChatSession.objects.filter(pk=session_id),
            {"context_tokens": F("context_tokens") + tokens},
        ),
        session_id=int,
        tokens=int,
    )
    grow.execute(session_id=session.pk, tokens=25)
    grow.execute(session_id=session.pk, tokens=5)
    assert ChatSession.objects.get(pk=session.pk).context_tokens == 130


def test_the_sql_is_built_once_and_sent_again(owner):
    session = make_session(owner)
    built = []

    def build(session_id: int):
        built.append(session_id)
        return ChatSession.objects.filter(pk=session_id).values_list("title")

    titles = Statement(build, session_id=int)
    titles.rows(session_id=session.pk)
    with CaptureQueriesContext(connection) as sent:
        for _ in range(3):
            titles.rows(session_id=session.pk)
    assert len(built) == 1  # once, with its stand-in values
    assert len(sent.captured_queries) == 3
    assert len({query["sql"] for query in sent.captured_queries}) == 1
    assert all(str(session.pk) in query["sql"] for query in sent.captured_queries)


def test_a_value_the_orm_rewrites_cannot_be_a_parameter(owner):
    make_session(owner)
    matching = Statement(
        lambda words: ChatSession.objects.filter(title__contains=words).values_list("pk"),
        words=str,
    )
    with pytest.raises(ValueError, match="not in the statement's SQL: {'words'}"):
        matching.rows(words="report")


def test_a_run_must_give_exactly_the_statements_parameters(owner):
    titles = Statement(
        lambda session_id: ChatSession.objects.filter(pk=session_id).values_list("title"),
        session_id=int,
    )
    with pytest.raises(TypeError, match=r"a statement of \['session_id'\] was given \['pk'\]"):
        titles.rows(pk=1)


def test_an_entry_appended_moves_the_leaf_and_the_context_size(owner):
    session = make_session(owner)
    first = session.append_message("user", [{"type": "text", "text": "four words in here"}])
    reply = session.append_message(
        "assistant", [{"type": "text", "text": "ok"}], input_tokens=900, output_tokens=10
    )
    after = session.append_message("user", [{"type": "text", "text": "more"}])
    row = ChatSession.objects.get(pk=session.pk)
    assert (first.parent_id, reply.parent_id, after.parent_id) == (None, first.pk, reply.pk)
    assert row.leaf_id == after.pk
    # the reply's usage set the size (910), and the next message added its estimate
    assert row.context_tokens == 910 + after.context_added
    assert row.updated_at >= timezone.now() - timedelta(minutes=1)
    assert Entry.objects.filter(session=session).count() == 3


def test_an_insert_writes_the_row_the_orm_writes_and_takes_its_key(owner):
    session = make_session(owner)
    fields = {
        "session_id": session.pk,
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "data": {"purpose": "handoff"},
        "input_tokens": 12,
        "created_at": NOON,
    }
    inserted = Insert(Entry).save(Entry(**fields))
    saved = Entry(**fields)
    saved.save(force_insert=True)
    assert inserted.pk is not None and inserted.pk != saved.pk
    assert inserted._state.adding is False  # a saved row: it updates, it does not insert again
    columns = [field.attname for field in Entry._meta.concrete_fields if field.attname != "id"]
    row = Entry.objects.values_list(*columns)
    assert row.get(pk=inserted.pk) == row.get(pk=saved.pk)
    assert Entry.objects.get(pk=inserted.pk).data == {"purpose": "handoff"}


def test_an_insert_sends_the_signals_a_save_sends(owner):
    session = make_session(owner)
    heard = []

    def pre(sender, instance, **kwargs):
        heard.append(("pre_save", instance.pk))

    def post(sender, instance, created, **kwargs):
        heard.append(("post_save", created, instance.pk is not None))

    pre_save.connect(pre, sender=Entry)
    post_save.connect(post, sender=Entry)
    try:
        Insert(Entry).save(Entry(session_id=session.pk, role="user"))
    finally:
        pre_save.disconnect(pre, sender=Entry)
        post_save.disconnect(post, sender=Entry)
    assert heard == [("pre_save", None), ("post_save", True, True)]


def test_one_instance_is_given_or_the_models_does_not_exist_is_raised(owner):
    session = make_session(owner)
    reads = Statement(lambda session_id: ChatSession.objects.filter(pk=session_id), session_id=int)
    assert reads.one(session_id=session.pk).pk == session.pk
    with pytest.raises(ChatSession.DoesNotExist):
        reads.one(session_id=session.pk + 1000)


def test_on_postgresql_an_entry_is_appended_by_one_statement(owner):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no data-modifying WITH: its three statements share a transaction")
    session = make_session(owner)
    first = session.append_message("user", [{"type": "text", "text": "hello"}])
    with CaptureQueriesContext(connection) as captured:
        reply = session.append_message(
            "assistant", [{"type": "text", "text": "ok"}], input_tokens=900, output_tokens=10
        )
    assert len(captured) == 1, [query["sql"] for query in captured]
    row = ChatSession.objects.get(pk=session.pk)
    assert (reply.parent_id, row.leaf_id, row.context_tokens) == (first.pk, reply.pk, 910)


def test_an_entry_for_a_session_that_is_gone_is_refused_and_nothing_is_written(owner):
    gone = make_session(owner)
    ChatSession.objects.filter(pk=gone.pk).delete()
    with pytest.raises(ChatSession.DoesNotExist):
        gone.append_message("user", [{"type": "text", "text": "into the void"}])
    assert not Entry.objects.filter(session_id=gone.pk).exists()


def test_on_postgresql_a_first_prompt_is_claimed_stored_titled_and_read_around_in_one_transaction(
    owner,
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's statements are calls in the process: no round trips")
    session = make_session(owner)
    with round_trips.counted(connection) as trips:
        submitted, claimed = queue_prompt(session, "hello there", "gen-1", "channel-1")
    assert claimed is not None
    assert claimed[1].user.content == [{"type": "text", "text": "hello there"}]
    # The claim with the prompt and its title (one statement) and the turn's three reads, in a
    # transaction: a round trip each, and its commit. Were one: the statements were pipelined,
    # through psycopg's private API (issue 52).
    assert trips == [5]
    row = ChatSession.objects.get(pk=session.pk)
    assert (row.leaf_id, row.title, row.generation_id) == (
        claimed[1].user.pk,
        "hello there",
        "gen-1",
    )
    assert (claimed[0].leaf_id, claimed[0].title) == (claimed[1].user.pk, "hello there")


def test_on_postgresql_a_prompt_that_mentions_another_session_is_stored_with_its_claim_too(owner):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's statements are calls in the process: no round trips")
    notes = ChatSession.objects.create(owner=owner, model=FAKE_MODEL, title="Lisbon notes")
    session = make_session(owner)
    with round_trips.counted(connection) as trips:
        submitted, claimed = queue_prompt(session, f"what did @#{notes.pk} say?", "gen-1", "c-1")
    assert claimed is not None
    assert claimed[1].user.data == {"mentions": [{"session": notes.pk, "title": "Lisbon notes"}]}
    # The mention's one read (the owner's session, its title), then the claim with the prompt
    # and the turn's reads in one transaction, as for a prompt that mentions none (5). Were 7:
    # a mention took the claim in a transaction of its own, and read its session twice.
    assert trips == [6]


def test_a_prompt_refused_the_claim_stores_nothing_and_titles_nothing_it_waits_in_the_queue(
    owner,
):
    session = make_session(owner)
    ChatSession.objects.filter(pk=session.pk).update(
        generation_id="gen-1", generation_lease_until=timezone.now() + timedelta(minutes=1)
    )
    submitted, claimed = queue_prompt(session, "asked while it ran", "gen-2", "channel-2")
    assert claimed is None and submitted.queued is not None
    row = ChatSession.objects.get(pk=session.pk)
    assert (row.generation_id, row.leaf_id, row.title) == ("gen-1", None, "")
    assert not Entry.objects.filter(session_id=session.pk).exists()
    assert list(PendingPrompt.objects.values_list("text", flat=True)) == ["asked while it ran"]


def test_a_prompt_that_finds_prompts_queued_in_a_free_session_goes_after_them(owner):
    session = make_session(owner, exchanges=1)
    PendingPrompt.objects.create(session_id=session.pk, text="queued before the claim lapsed")
    submitted, claimed = queue_prompt(session, "the newer question", "gen-1", "channel-1")
    assert claimed is not None
    turn = claimed[1]
    assert turn.text == "queued before the claim lapsed"
    texts = [entry.text for entry in Entry.objects.filter(session_id=session.pk).order_by("id")]
    assert texts == ["question 0", "answer 0", "queued before the claim lapsed"]
    assert list(PendingPrompt.objects.values_list("text", flat=True)) == ["the newer question"]


@pytest.mark.parametrize(
    ("context", "sent_at_once"),
    [(4_993, True), (4_994, False)],
    ids=["a token under the threshold", "at the threshold"],
)
def test_a_prompt_is_sent_at_once_only_under_its_owners_automatic_handoff_threshold(
    owner, settings, context, sent_at_once
):
    """The window 10,000 tokens, the owner's threshold 50 %: 5,000. "a short question" is 16
    bytes, 6 tokens: after 4,993 it makes 4,999, after 4,994 it makes 5,000."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 10_000, "max_output": 1_000},
    }
    Preferences.objects.create(user=owner, auto_handoff_at=50)
    session = make_session(owner, exchanges=2)
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=context)
    session.refresh_from_db()
    postgresql = connection.vendor == "postgresql"
    with round_trips.counted(connection) if postgresql else contextlib.nullcontext() as trips:
        submitted, claimed = queue_prompt(session, "a short question", "gen-1", "channel-1")
    assert claimed is not None
    turn = claimed[1]
    if sent_at_once:
        assert (turn.handoff, turn.text) == (False, "a short question")
        assert not PendingPrompt.objects.exists()
        assert not postgresql or trips == [5]  # as a first prompt's, above
    else:
        assert (turn.handoff, turn.text, turn.user) == (True, "", None)
        assert list(PendingPrompt.objects.values_list("text", flat=True)) == ["a short question"]
        assert Entry.objects.filter(session_id=session.pk).count() == 4


def test_a_prompt_from_a_tab_that_missed_a_change_of_model_is_held_to_the_new_models_window(
    owner, settings
):
    """The tab's session still says the fake model (its window 200,000 tokens); another tab
    changed it to one of 10,000. At 50 %, 4,994 + 6 tokens is the new window's threshold."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 200_000, "max_output": 1_000},
        "claude-small": {"label": "Small Claude", "window": 10_000, "max_output": 1_000},
    }
    Preferences.objects.create(user=owner, auto_handoff_at=50)
    session = make_session(owner, exchanges=2)
    ChatSession.objects.filter(pk=session.pk).update(model="claude-small", context_tokens=4_994)
    session.context_tokens = 4_994  # what the tab knows; its model is the old one
    submitted, claimed = queue_prompt(session, "a short question", "gen-1", "channel-1")
    assert claimed is not None
    assert (claimed[0].model, claimed[1].handoff) == ("claude-small", True)
    assert list(PendingPrompt.objects.values_list("text", flat=True)) == ["a short question"]


def signed_in_and_held(user) -> sign_ins.Held:
    """A sign-in of `user` that Django's check has held for once, as a socket's first frame's."""
    client = Client()
    client.force_login(user)
    key = client.session.session_key
    assert sign_ins.holds(key, user.pk)
    held = sign_ins.held(key, user.pk)
    assert held is not None
    return held


def test_a_prompt_whose_sign_in_held_is_checked_by_its_claim_in_one_transaction(owner):
    session = make_session(owner)
    held = signed_in_and_held(owner)
    checks = []
    postgresql = connection.vendor == "postgresql"
    with round_trips.counted(connection) if postgresql else contextlib.nullcontext() as trips:
        submitted, claimed = queue_prompt(
            session, "hello there", "gen-1", "channel-1", lambda: checks.append(1) or True, held
        )
    assert claimed is not None and not submitted.unchecked
    assert checks == []  # the claim's statement made the check
    if postgresql:
        assert trips == [5]  # the claim with the check and the prompt, the turn's reads
    assert ChatSession.objects.get(pk=session.pk).generation_id == "gen-1"


@pytest.mark.parametrize(
    "change",
    [
        lambda owner, held: owner.set_password("changed-elsewhere-123") or owner.save(),
        lambda owner, held: Session.objects.filter(session_key=held.key).delete(),
        lambda owner, held: ChatSession.objects.filter(owner=owner).update(deleted_at=NOON),
    ],
    ids=["a new password", "signed out", "the session deleted"],
)
def test_a_prompt_whose_sign_in_or_session_changed_since_it_held_is_not_claimed(owner, change):
    session = make_session(owner)
    held = signed_in_and_held(owner)
    change(owner, held)
    checks = []
    submitted, claimed = queue_prompt(
        session, "hello there", "gen-1", "channel-1", lambda: checks.append(1) or False, held
    )
    assert submitted.unchecked and claimed is None
    assert checks == [1]  # the claim was not taken: the check itself said why
    row = ChatSession.objects.get(pk=session.pk)
    assert (row.generation_id, row.leaf_id) == ("", None)
    assert not PendingPrompt.objects.exists()


@pytest.mark.django_db(transaction=True)  # as a call runs: no test's transaction around it
def test_on_postgresql_a_reply_ends_its_claim_and_reads_the_status_line_in_one_transaction(
    owner,
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's statements are calls in the process: no round trips")
    session = make_session(owner, exchanges=1)
    submitted, claimed = queue_prompt(session, "one more question", "gen-1", "channel-1")
    assert claimed is not None
    with round_trips.counted(connection) as trips:
        turn = next_turn(claimed[0], "gen-1", auto_handoff=True)
    # Released if nothing waits, and the line read after it, in a transaction: 7 round trips,
    # and one more for each of its two statements psycopg prepares in it (it prepares one the
    # fifth time a connection sends it, in a round trip of its own: which call that is depends
    # on the tests that ran before on the connection). Were one, pipelined.
    assert trips[0] in (7, 8, 9)
    assert turn.text == "" and turn.status is not None
    shown, line = turn.status.session, turn.status.line
    assert (shown.pk, line.generating, line.queued) == (session.pk, False, 0)
    assert ChatSession.objects.get(pk=session.pk).generation_id == ""


def test_a_reply_that_ends_with_a_prompt_queued_sends_it_next_and_keeps_the_claim(owner):
    session = make_session(owner)
    _, claimed = queue_prompt(session, "the first question", "gen-1", "channel-1")
    assert claimed is not None
    later, none = queue_prompt(session, "asked while it ran", "gen-2", "channel-2")
    assert none is None and later.queued is not None
    turn = next_turn(claimed[0], "gen-1", auto_handoff=True)
    assert turn.text == "asked while it ran"
    assert turn.user is not None and turn.user.content == [
        {"type": "text", "text": "asked while it ran"}
    ]
    row = ChatSession.objects.get(pk=session.pk)
    assert (row.generation_id, row.leaf_id) == ("gen-1", turn.user.pk)
    assert not PendingPrompt.objects.filter(session_id=session.pk).exists()


def test_a_sessions_seed_is_found_by_the_index_of_roots_not_by_walking_every_users_entries(owner):
    """The status line reads a handed-off session's seed (its first entry without a parent) at
    every turn. Without an index of roots, PostgreSQL found it by walking the entry table in
    id order, every user's entries before it: 17-36 ms behind 140,000 entries."""
    earlier = make_session(owner)
    for n in range(30):
        earlier.append_message("user", [{"type": "text", "text": f"earlier {n}"}])
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "the seed"}])
    if connection.vendor == "postgresql":  # a table this small is read whole, index or none
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
    plan = status.SEED.build(session_id=session.pk).explain()
    assert "chat_entry_roots" in plan
    assert status.SEED.rows(session_id=session.pk) == [({},)]


def test_a_statement_read_inside_its_block_is_answered_there(owner):
    session = make_session(owner)
    reads = Statement(
        lambda session_id: ChatSession.objects.filter(pk=session_id).values_list("title"),
        session_id=int,
    )
    with sent_together():
        read = reads.send(session_id=session.pk)
        assert read() == [(session.title,)]  # its answer, before the block's end
        again = reads.send(session_id=session.pk)
    assert again() == [(session.title,)]


SAMPLES = {int: 1, str: "a value", datetime: NOON}


def test_every_statement_of_the_app_compiles_and_runs_on_this_database(owner):
    """Each statement the app's modules define, built for this database with a value of each
    parameter's type and run: a query changed so that a parameter no longer reaches its SQL as
    given fails here, not at a user's prompt. A read gives what its queryset gives."""
    session = make_session(owner, exchanges=2)
    session.append_message("user", [{"type": "text", "text": "hi"}], data={"mentions": []})
    Preferences.objects.create(user=owner, auto_handoff_at=80, recall_everywhere=False)
    PendingPrompt.objects.create(session=session, text="waiting")
    ChatSession.objects.filter(pk=session.pk).update(generation_id="gen", deleted_at=None)
    given = {"session_id": session.pk, "owner_id": owner.pk, "user_id": owner.pk, "after": 0}
    found = [
        value
        for name in sorted(structure.modules())
        if name.startswith("sessions") and ".migrations" not in name
        for attribute, value in vars(importlib.import_module(name)).items()
        if isinstance(value, Statement)
    ]
    assert len(found) >= 20
    compared = 0
    for statement in found:
        read = type(statement) is Statement  # an update changes nothing of the session's
        values = {
            parameter: given.get(parameter, SAMPLES[kind]) if read else SAMPLES[kind]
            for parameter, kind in statement.names.items()
        }
        sql, params = statement.sql(**values)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        if read:  # what the ORM itself gives
            expected = list(statement.build(**values))
            if expected and not isinstance(expected[0], tuple):
                given_back = [_state_of(one) for one in statement.objects(**values)]
                assert given_back == [_state_of(one) for one in expected]
            else:
                assert _typed(statement.rows(**values)) == _typed(expected)
            compared += bool(expected)
    assert compared >= 8  # reads that found rows to compare


def _state_of(instance: object) -> dict[str, object]:
    """A model instance's columns and annotations, each with its type (1 is not True)."""
    return {
        name: (type(value), value)
        for name, value in vars(instance).items()
        if not name.startswith("_")
    }


def _typed(rows: list[tuple[object, ...]]) -> list[list[tuple[type, object]]]:
    return [[(type(value), value) for value in row] for row in rows]
