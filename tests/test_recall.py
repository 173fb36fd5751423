"""Recall (issue 19, items 1 and 2): the new session's model looks things up in the sessions it
came from, and the page links each entry it found to that entry in its session."""

from __future__ import annotations

import html

import pytest

from sessions import generation, handoff
from sessions.agent.recall_tool import look_up
from sessions.agent.tool import ToolInputError
from sessions.generation.turns import AS_CLAIMED
from sessions.models import ChatSession, Entry, Preferences

from .conftest import db_async, make_session
from .fake_anthropic import Reply

DETAIL = "The zanzibar endpoint needs the header X-Trace-Id on every call."


def handed_off(owner) -> tuple[ChatSession, ChatSession, Entry]:
    """An old session that said a detail, and the session its handoff started."""
    old = make_session(owner, exchanges=2)
    said = old.append_message("assistant", [{"type": "text", "text": DETAIL}])
    reply = old.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nShip it."}], data={"purpose": "handoff"}
    )
    new = handoff.new_session(old, from_entry=reply, content=handoff.wrap("## Goal\nShip it."), data={"warnings": []})  # fmt: skip
    return old, new, said


def offered(request: dict) -> list[str]:
    return [tool["name"] for tool in request["json"].get("tools", [])]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_recall_is_offered_only_where_there_is_a_lineage(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Plain."), Reply.text("Handed off."))
    plain = await db_async(make_session)(owner)
    _, new, _ = await db_async(handed_off)(owner)
    for session, answer in ((plain, "Plain."), (new, "Handed off.")):
        _, tab = await open_tab(owner, session)
        await tab.send(message="Hello")
        await tab.until(answer)
        await generation.wait_idle()
    assert offered(fake_anthropic.requests[0]) == ["todo_write", "handoff"]
    assert offered(fake_anthropic.requests[1]) == ["todo_write", "recall", "handoff"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_model_recalls_what_the_document_left_out_and_the_page_links_to_it(
    owner, fake_anthropic, open_tab, client
):
    old, new, said = await db_async(handed_off)(owner)
    fake_anthropic.enqueue(
        Reply.tool("recall", {"query": "zanzibar endpoint"}),
        Reply.text(f"It needs X-Trace-Id (session {old.pk}, entry {said.pk})."),
    )
    _, tab = await open_tab(owner, new)
    await tab.send(message="Which header did the zanzibar endpoint need?")
    await tab.until("It needs X-Trace-Id")
    await generation.wait_idle()
    result = fake_anthropic.requests[1]["json"]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert f"[session {old.pk}, entry {said.pk}, assistant, " in result["content"]
    assert "zanzibar endpoint needs the header X-Trace-Id" in result["content"]
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(new.get_absolute_url())).content.decode()
    link = f'<a href="/sessions/{old.pk}/?at={said.pk}#entry-{said.pk}">Session {old.pk}, entry {said.pk}</a>'
    assert link in page
    assert 'recall(query="zanzibar endpoint")' in html.unescape(page)  # the call shows its query
    opened = (await db_async(client.get)(f"/sessions/{old.pk}/?at={said.pk}")).content.decode()
    assert f'id="entry-{said.pk}"' in opened and DETAIL in opened


@pytest.mark.django_db
def test_a_fork_recalls_from_the_session_it_was_forked_from(owner):
    old = make_session(owner, exchanges=1)
    said = old.append_message("user", [{"type": "text", "text": DETAIL}])
    forked = old.fork(old.leaf_id)
    found = look_up({"query": "X-Trace-Id"}, forked)
    assert f"[session {old.pk}, entry {said.pk}, user, " in found.text
    assert found.details["recall"]["entries"][0]["entry"] == said.pk


@pytest.mark.django_db
def test_a_session_outside_the_lineage_or_another_users_is_refused(owner, other_user):
    _, new, _ = handed_off(owner)
    theirs = make_session(other_user, exchanges=1)
    stranger = make_session(owner, exchanges=1)
    for session_id in (theirs.pk, stranger.pk):
        with pytest.raises(ToolInputError, match=f"Session {session_id} is not one this session came from"):  # fmt: skip
            look_up({"query": "zanzibar", "session": session_id}, new)


@pytest.mark.django_db
def test_a_recall_that_finds_nothing_says_so(owner):
    _, new, _ = handed_off(owner)
    found = look_up({"query": "kilimanjaro"}, new)
    assert (found.text, found.is_error) == (
        "Nothing in the earlier sessions mentions “kilimanjaro”.",
        False,
    )


@pytest.mark.django_db
def test_recall_returns_at_most_its_limit_of_entries_and_characters(owner, settings):
    settings.AGENTWEB_RECALL_ENTRIES, settings.AGENTWEB_RECALL_CHARS = 3, 150
    old = make_session(owner)
    for i in range(10):
        old.append_message("user", [{"type": "text", "text": f"zanzibar note {i} " + "x" * 80}])
    forked = old.fork(old.leaf_id)
    entries = look_up({"query": "zanzibar"}, forked).details["recall"]["entries"]
    assert len(entries) == 3
    assert sum(len(entry["text"]) for entry in entries) <= 150


def test_the_handoff_prompt_no_longer_asks_the_document_to_carry_everything():
    prompt = handoff.build_prompt()
    assert "Be concrete and complete" not in prompt
    assert (
        "The next session can look up the exact words of this conversation with its recall "
        "tool: carry what it needs to act on, not everything."
    ) in prompt


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_offline_a_question_about_a_word_only_the_parent_holds_is_answered_with_a_link(
    owner, open_tab
):
    old, new, said = await db_async(handed_off)(owner)
    await db_async(lambda: ChatSession.objects.filter(pk=new.pk).update(model="local"))()
    _, tab = await open_tab(owner, new)
    await tab.send(message="Which header did zanzibar need?")
    shown = await tab.until("From the earlier sessions, best match first:", timeout=20)
    await generation.wait_idle()
    assert "zanzibar endpoint needs the header X-Trace-Id" in shown
    link = f'<a href="/sessions/{old.pk}/?at={said.pk}#entry-{said.pk}"'
    assert link in shown
    call = await db_async(lambda: Entry.objects.get(session=new, role="toolResult"))()
    assert call.data["message"]["toolName"] == "recall"


@pytest.mark.django_db
def test_recall_is_offered_where_it_can_read_and_deciding_costs_no_walk(
    owner, django_assert_num_queries
):
    from sessions.agent.recall_tool import RECALL

    _, new, _ = handed_off(owner)
    forked = new.fork(new.leaf_id)
    alone = make_session(owner, exchanges=1)
    with django_assert_num_queries(0):  # a session's origin is in its own row
        assert RECALL.offered(new) and RECALL.offered(forked)
    with django_assert_num_queries(2):  # one look for mentions, one at the owner's preference
        assert not RECALL.offered(alone)
    claimed = AS_CLAIMED.one(session_id=alone.pk)  # as a prompt's claim reads it
    with django_assert_num_queries(1):  # the claim read the preference
        assert not RECALL.offered(claimed)
    from sessions import mentions

    text = f"as in @#{new.pk}"
    alone.append_message(
        "user", [{"type": "text", "text": text}], data=mentions.data_of(alone, text)
    )
    assert RECALL.offered(alone)


# Recall by words (issue 54, item 5): any of the words, the rarer weighing more; all sessions.


def said_in_parent(owner, *texts: str) -> tuple[ChatSession, list[int]]:
    """A session handed off from one whose user said `texts`, in order; their entries' ids."""
    old = make_session(owner, exchanges=1)
    ids = [old.append_message("user", [{"type": "text", "text": t}]).pk for t in texts]
    reply = old.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nShip it."}], data={"purpose": "handoff"}
    )
    new = handoff.new_session(old, from_entry=reply, content=handoff.wrap("## Goal\nShip it."), data={"warnings": []})  # fmt: skip
    return new, ids


def recalled(session: ChatSession, query: str) -> list[int]:
    return [hit["entry"] for hit in look_up({"query": query}, session).details["recall"]["entries"]]


@pytest.mark.django_db
def test_a_models_keywords_find_a_fact_said_in_other_words(owner):
    new, (fact,) = said_in_parent(owner, "Our team lunch place is called Marigold Bistro.")
    assert recalled(new, "Marigold lunch place") == [fact]
    assert recalled(new, "marigold dinner venue") == [fact]  # one word of three is enough


@pytest.mark.django_db
def test_recall_ranks_the_entries_holding_more_and_rarer_words_first(owner):
    new, (both, rare, *common) = said_in_parent(
        owner,
        "Lunch at Marigold on Friday",
        "Marigold closes early on Mondays",
        "Lunch was late today",
        "Lunch again, the usual place",
        "Lunch orders go to Ana",
    )
    # Both words first; then the rare word alone; then the common word alone, newest first.
    assert recalled(new, "marigold lunch") == [both, rare, *reversed(common)]


@pytest.mark.django_db
def test_among_equals_the_newest_entry_wins(owner):
    new, (older, newer) = said_in_parent(owner, "The port is 8080", "The port is 9090")
    assert recalled(new, "port") == [newer, older]


@pytest.mark.django_db
def test_recall_reads_all_the_owners_sessions_only_with_their_preference(owner, other_user):
    new, _ = said_in_parent(owner, "Nothing about it here")
    elsewhere = make_session(owner)
    fact = elsewhere.append_message("user", [{"type": "text", "text": "The kiosk PIN is 4417"}])
    theirs = make_session(other_user)
    theirs.append_message("user", [{"type": "text", "text": "Their kiosk PIN is 9999"}])
    assert recalled(new, "kiosk PIN") == []
    Preferences.objects.create(user=owner, recall_everywhere=True)
    found = look_up({"query": "kiosk PIN"}, new)
    assert [hit["entry"] for hit in found.details["recall"]["entries"]] == [fact.pk]
    assert found.details["recall"]["everywhere"] is True
    assert "9999" not in found.text


@pytest.mark.django_db
def test_with_the_preference_recall_is_offered_in_a_session_with_no_lineage(owner):
    from sessions.agent.recall_tool import RECALL

    alone = make_session(owner, exchanges=1)
    assert not RECALL.offered(alone)
    Preferences.objects.create(user=owner, recall_everywhere=True)
    assert RECALL.offered(ChatSession.objects.get(pk=alone.pk))
    assert RECALL.offered(AS_CLAIMED.one(session_id=alone.pk))


@pytest.mark.django_db
def test_the_recall_card_says_when_it_read_all_the_owners_sessions(owner, client):
    Preferences.objects.create(user=owner, recall_everywhere=True)
    source = make_session(owner)
    source.append_message("user", [{"type": "text", "text": "The kiosk PIN is 4417"}])
    session = make_session(owner, exchanges=1)
    found = look_up({"query": "kiosk"}, session)
    call = {"type": "toolCall", "id": "t1", "name": "recall", "arguments": {"query": "kiosk"}}
    session.append_message("assistant", [call])
    session.append(
        kind=Entry.Kind.MESSAGE,
        role=Entry.Role.TOOL_RESULT,
        content=[{"type": "text", "text": found.text}],
        data={"message": {"toolCallId": "t1", "toolName": "recall", "details": found.details}},
    )
    client.force_login(owner)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Recalled from all your sessions (your preference)." in page
    assert f"Session {source.pk}, entry" in page


@pytest.mark.django_db
def test_an_entry_the_user_turned_down_later_is_marked_revised_with_a_link(owner, client):
    new, (idea, no) = said_in_parent(
        owner,
        "Plan: use queueMessage for the follow-ups, then appendMessage at the end.",
        "No, don't queue: why would we queue and then append? Append directly.",
    )
    found = look_up({"query": "queueMessage follow-ups"}, new)
    assert f"entry {idea}, user, " in found.text
    assert f"(later revised: entry {no})" in found.text
    hits = {hit["entry"]: hit for hit in found.details["recall"]["entries"]}
    assert hits[idea]["revised_by"] == no


@pytest.mark.django_db
def test_an_entry_a_later_decision_replaced_is_marked_revised_too(owner):
    new, (idea, instead) = said_in_parent(
        owner,
        "We decided to use Redis for the job queue.",
        "Let's use PostgreSQL for the job queue instead, one service less.",
    )
    found = look_up({"query": "Redis job queue"}, new)
    assert f"entry {idea}, user, " in found.text
    assert f"(later revised: entry {instead})" in found.text


@pytest.mark.django_db
def test_agentweb_own_handoff_requests_are_not_recalled(owner):
    old = make_session(owner, exchanges=1)
    request = old.append_message(
        "user",
        [{"type": "text", "text": "Write the document. <ledger>zanzibar</ledger>"}],
        data={"purpose": "handoff"},
    )
    said = old.append_message("user", [{"type": "text", "text": "The zanzibar key is K-77."}])
    forked = old.fork(old.leaf_id)
    assert recalled(forked, "zanzibar") == [said.pk]
    assert request.pk not in recalled(forked, "zanzibar")
