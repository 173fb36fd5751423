"""Branches of the session tree: edit, regenerate, the switcher, the tree view, fork, export."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from sessions import generation, session_file, store
from sessions.generation import claims
from sessions.models import BranchRefused, ChatSession, Entry
from sessions.tree import Siblings

from .conftest import db_async, linear_session, make_session
from .fake_anthropic import Reply

db = pytest.mark.django_db


def say(session: ChatSession, role: str, text: str) -> Entry:
    return session.append_message(role, [{"type": "text", "text": text}])


def texts(session: ChatSession) -> list[str]:
    return [entry.text for entry in store.get_branch(session)]


def two_answers(owner) -> tuple[ChatSession, Entry, Entry, Entry]:
    """A question answered twice: the first answer, then (after the leaf went back) another,
    which was followed up."""
    session = make_session(owner)
    question = say(session, "user", "Which parser?")
    first = say(session, "assistant", "Use configparser.")
    session.move_leaf(question.pk)
    second = say(session, "assistant", "Use tomllib.")
    say(session, "user", "Why tomllib?")
    return session, question, first, second


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


# --- the store -------------------------------------------------------------------------
@db
def test_the_outline_tells_each_entry_with_siblings_where_it_stands(owner):
    session, question, first, second = two_answers(owner)
    outline = store.branch_outline(session)
    assert [pk for pk, _ in outline][:2] == [question.pk, second.pk]
    assert outline.siblings[second.pk] == Siblings(2, 2, first.pk, None)
    assert question.pk not in outline.siblings  # the only child of the root


@db
def test_switching_to_a_sibling_goes_on_from_the_newest_entry_of_its_branch(owner):
    session, question, first, second = two_answers(owner)
    assert session.switch_branch(first.pk) == first.pk
    assert texts(session) == ["Which parser?", "Use configparser."]
    assert store.session_context(session)[-1]["content"][0]["text"] == "Use configparser."
    # Back: the leaf is the end of that branch, the follow-up, not the answer itself.
    session.switch_branch(second.pk)
    assert texts(session) == ["Which parser?", "Use tomllib.", "Why tomllib?"]


@db
def test_the_context_size_follows_the_branch(owner):
    session, question, first, second = two_answers(owner)
    session.switch_branch(second.pk)
    long_branch = ChatSession.objects.get(pk=session.pk).context_tokens
    session.switch_branch(first.pk)
    assert ChatSession.objects.get(pk=session.pk).context_tokens < long_branch


@db
def test_the_leaf_cannot_move_while_a_reply_is_generated(owner):
    session, question, first, second = two_answers(owner)
    assert claims.claim(session.pk, "gen-1", "prompt", "channel")
    with pytest.raises(BranchRefused, match="Wait for the reply to end"):
        session.switch_branch(first.pk)
    assert texts(session)[-1] == "Why tomllib?"


@db
def test_an_entry_of_another_session_is_not_a_branch_of_this_one(owner):
    session, *_ = two_answers(owner)
    other = make_session(owner, exchanges=1)
    with pytest.raises(BranchRefused, match="not part of this session"):
        session.switch_branch(store.get_branch(other)[0].pk)


@db
def test_a_fork_copies_the_branch_up_to_an_entry_and_records_where_it_came_from(owner):
    session, question, first, second = two_answers(owner)
    forked = session.fork(second.pk)
    assert forked.pk != session.pk and forked.forked_from_id == second.pk
    assert texts(forked) == ["Which parser?", "Use tomllib."]
    assert forked.context_tokens > 0
    say(forked, "user", "Only in the fork")
    assert texts(session) == ["Which parser?", "Use tomllib.", "Why tomllib?"]
    assert Entry.objects.filter(session=session).count() == 4


@db
def test_a_forked_compaction_keeps_pointing_at_its_first_kept_entry(owner):
    session = make_session(owner, exchanges=2)
    kept = store.get_branch(session)[2]
    compaction = session.append(
        kind=Entry.Kind.COMPACTION,
        content=[{"type": "text", "text": "Earlier: chose tomllib."}],
        data={"refs": {"firstKeptEntryId": kept.pk}},
    )
    forked = session.fork(compaction.pk)
    copies = store.get_branch(forked)
    assert copies[-1].data["refs"]["firstKeptEntryId"] == copies[2].pk
    assert copies[2].text == kept.text


@db
def test_the_tree_lists_every_branch_and_indents_only_where_it_forks(owner):
    session, question, first, second = two_answers(owner)
    rows = store.tree(session)
    assert [(row.label, row.text, row.depth) for row in rows] == [
        ("You", "Which parser?", 0),
        ("Assistant", "Use configparser.", 1),
        ("Assistant", "Use tomllib.", 1),
        ("You", "Why tomllib?", 1),
    ]
    assert [row.on_branch for row in rows] == [True, False, True, True]
    assert rows[0].forks == 2 and rows[-1].is_leaf


@db
def test_a_long_linear_session_is_a_flat_tree(owner):
    session = make_session(owner, exchanges=50)
    rows = store.tree(session)
    assert len(rows) == 100 and {row.depth for row in rows} == {0}


@db
def test_jsonl_export_and_import_keep_the_whole_tree_and_the_leaf(owner):
    session, question, first, second = two_answers(owner)
    session.switch_branch(first.pk)  # the leaf is not the newest entry
    lines = "".join(session_file.export_jsonl(session)).splitlines()
    imported = session_file.import_jsonl(owner, lines)
    assert texts(imported) == ["Which parser?", "Use configparser."]
    shape = sorted(
        (e.text, e.parent.text if e.parent else None)
        for e in Entry.objects.filter(session=imported)
    )
    assert shape == [
        ("Use configparser.", "Which parser?"),
        ("Use tomllib.", "Which parser?"),
        ("Which parser?", None),
        ("Why tomllib?", "Use tomllib."),
    ]
    ids = [json.loads(line)["id"] for line in lines[1:]]
    assert len(set(ids)) == 4


@db
def test_the_markdown_export_and_the_handoff_follow_the_current_branch(owner):
    session, question, first, second = two_answers(owner)
    session.switch_branch(first.pk)
    markdown = session_file.export_markdown(session)
    assert "Use configparser." in markdown and "tomllib" not in markdown
    assert store.count_messages(store.get_branch(session)) == 2


# --- the pages --------------------------------------------------------------------------
@db
def test_the_page_shows_a_switcher_on_an_entry_with_siblings(signed_in, owner):
    session, question, first, second = two_answers(owner)
    page = signed_in.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert page.count('class="branch-position">2 / 2<') == 1
    assert 'aria-label="Previous branch"' in page
    assert "Use configparser." not in page  # the other branch is not shown


@db
def test_the_switcher_moves_the_session_to_the_other_branch(signed_in, owner):
    session, question, first, second = two_answers(owner)
    response = signed_in.post(
        reverse("chat:switch", args=[session.pk]), {"entry": first.pk}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 204
    page = signed_in.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "Use configparser." in page and "Why tomllib?" not in page
    assert 'class="branch-position">1 / 2<' in page


@db
def test_the_tree_view_lists_branches_and_jumps_to_an_entry(signed_in, owner):
    session, question, first, second = two_answers(owner)
    page = signed_in.get(reverse("chat:tree", args=[session.pk])).content.decode()
    assert "Use configparser." in page and "Why tomllib?" in page
    assert "2 branches" in page
    response = signed_in.post(reverse("chat:switch", args=[session.pk]), {"entry": first.pk})
    assert response.url == f"/sessions/{session.pk}/?at={first.pk}#entry-{first.pk}"
    assert texts(session) == ["Which parser?", "Use configparser."]


def long_linear_session(owner, size: int) -> ChatSession:
    return linear_session(owner, [f"step {i}" for i in range(size)])


@db
def test_the_tree_of_a_long_session_opens_on_the_latest_full_page(signed_in, owner):
    session = long_linear_session(owner, 1_204)
    page = signed_in.get(reverse("chat:tree", args=[session.pk])).content.decode()
    assert "Entries 705–1204 of 1204" in page  # a full page, not the last 204 (issue 56, 7)
    assert "step 1203" in page and "step 704<" in page and "step 703<" not in page
    assert page.count('class="tree-row') == 500
    assert 'href="?page=2">Earlier entries</a>' in page
    first = signed_in.get(reverse("chat:tree", args=[session.pk]), {"page": "1"}).content.decode()
    assert "Entries 1–204 of 1204" in first and "step 0<" in first and "step 204<" not in first
    assert first.count('class="tree-row') == 204
    assert 'href="?page=3">The current entry</a>' in first


@db
def test_a_tree_page_past_the_last_or_unreadable_shows_a_page_that_exists(signed_in, owner):
    session = long_linear_session(owner, 600)
    for asked in ("99", "²", "-1"):
        page = signed_in.get(reverse("chat:tree", args=[session.pk]), {"page": asked})
        assert page.status_code == 200 and "Entries " in page.content.decode()


@db
def test_a_fork_opens_as_a_new_session_that_names_its_origin(signed_in, owner):
    session, question, first, second = two_answers(owner)
    response = signed_in.post(reverse("chat:fork", args=[session.pk]), {"entry": first.pk})
    forked = ChatSession.objects.get(forked_from=first)
    assert response.url == f"/sessions/{forked.pk}/"
    page = signed_in.get(response.url).content.decode()
    assert f'Forked from <a href="/sessions/{session.pk}/?at={first.pk}#entry-{first.pk}">' in page
    origin = signed_in.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert f'Forked into <a href="/sessions/{forked.pk}/">' in origin


@db
def test_branch_actions_on_another_users_session_are_not_found(signed_in, other_user):
    theirs = make_session(other_user, exchanges=1)
    entry = store.get_branch(theirs)[0].pk
    for name in ("chat:switch", "chat:fork"):
        assert signed_in.post(reverse(name, args=[theirs.pk]), {"entry": entry}).status_code == 404
    assert signed_in.get(reverse("chat:tree", args=[theirs.pk])).status_code == 404


@db
def test_a_switch_to_an_unknown_entry_says_so_and_changes_nothing(signed_in, owner):
    session, *_ = two_answers(owner)
    response = signed_in.post(
        reverse("chat:switch", args=[session.pk]), {"entry": "99999"}, HTTP_HX_REQUEST="true"
    )
    assert "That entry is not part of this session." in response.content.decode()
    assert texts(session)[-1] == "Why tomllib?"


# --- edit and regenerate, against the fake model ----------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_edited_message_goes_on_a_new_branch_and_the_model_answers_it(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner, exchanges=2)
    question = (await db_async(store.get_branch)(session))[2]  # "question 1"
    fake_anthropic.enqueue(Reply.text("Answer to the edit."))
    _, tab = await open_tab(owner, session)
    await tab.send(action="edit", entry=question.pk, message="question 1, reworded")
    html = await tab.until("Answer to the edit.</p>")
    assert "answer 1" not in html.split('id="transcript"')[-1]  # the old branch is gone
    assert 'class="branch-position">2 / 2<' in html  # the edited message's switcher
    await generation.wait_idle()
    sent = fake_anthropic.requests[-1]["json"]["messages"]
    assert [m["content"][0]["text"] for m in sent] == [
        "question 0",
        "answer 0",
        "question 1, reworded",
    ]
    assert await db_async(texts)(session) == [
        "question 0",
        "answer 0",
        "question 1, reworded",
        "Answer to the edit.",
    ]
    await db_async(session.switch_branch)(question.pk)  # the original is kept
    assert (await db_async(texts)(session))[2:] == ["question 1", "answer 1"]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_regenerated_reply_is_a_sibling_of_the_first(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    reply = (await db_async(store.get_branch)(session))[-1]
    fake_anthropic.enqueue(Reply.text("A second answer."))
    _, tab = await open_tab(owner, session)
    await tab.send(action="regenerate", entry=reply.pk)
    html = await tab.until("A second answer.</p>")
    assert 'class="branch-position">2 / 2<' in html
    await generation.wait_idle()
    sent = fake_anthropic.requests[-1]["json"]["messages"]
    assert sent == [{"role": "user", "content": [{"type": "text", "text": "question 0"}]}]
    branch = await db_async(store.get_branch)(session)
    assert [e.text for e in branch] == ["question 0", "A second answer."]
    assert branch[-1].parent_id == reply.parent_id


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_every_tab_of_the_session_sees_the_new_branch(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner, exchanges=1)
    reply = (await db_async(store.get_branch)(session))[-1]
    fake_anthropic.enqueue(Reply.text("Fresh answer."))
    _, tab = await open_tab(owner, session)
    _, other = await open_tab(owner, session)
    await tab.send(action="regenerate", entry=reply.pk)
    html = await other.until("Fresh answer.</p>")
    assert (
        'id="transcript" class="transcript" role="log" aria-label="Transcript" hx-swap-oob' in html
    )
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_edit_while_a_reply_streams_is_refused_and_nothing_moves(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner, exchanges=1)
    question = (await db_async(store.get_branch)(session))[0]
    fake_anthropic.enqueue(Reply.held(["partial "], ["rest"]))
    _, tab = await open_tab(owner, session)
    await tab.send(message="next question")
    await tab.until("partial ")
    await tab.send(action="edit", entry=question.pk, message="reworded")
    html = await tab.until("notice--error")
    assert "Wait for the reply to end (or cancel it) before changing branches." in html
    fake_anthropic.release()
    await generation.wait_idle()
    assert await db_async(texts)(session) == [
        "question 0",
        "answer 0",
        "next question",
        "partial rest",
    ]


@pytest.mark.parametrize(
    ("action", "pick", "reason"),
    [
        ("edit", 1, "Only a message you wrote can be edited."),  # a reply
        ("regenerate", 0, "Only a reply to a message can be regenerated."),  # a question
        ("regenerate", 2, "Only a reply to a message can be regenerated."),  # a handoff document
        ("edit", None, "Only a message you wrote can be edited."),  # another user's entry
    ],
)
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_what_cannot_be_edited_or_regenerated_is_refused_plainly(
    owner, other_user, fake_anthropic, open_tab, action, pick, reason
):
    session = await db_async(make_session)(owner, exchanges=1)
    await db_async(session.append_message)(
        "assistant", [{"type": "text", "text": "## Goal"}], data={"purpose": "handoff"}
    )
    theirs = await db_async(make_session)(other_user, exchanges=1)
    branch = await db_async(store.get_branch)(session if pick is not None else theirs)
    _, tab = await open_tab(owner, session)
    await tab.send(action=action, entry=branch[pick or 0].pk, message="changed")
    html = await tab.until("notice--error")
    assert reason in html
    assert fake_anthropic.requests == []
    assert len(await db_async(texts)(session)) == 3


def test_an_edit_frame_without_an_entry_is_refused():
    from sessions.forms import FrameError, parse_frame

    with pytest.raises(FrameError, match="names no entry"):
        parse_frame(json.dumps({"action": "edit", "message": "x"}))
    with pytest.raises(FrameError, match="Type a message first"):
        parse_frame(json.dumps({"action": "edit", "entry": 3, "message": "  "}))


def tree_rows(page: str) -> list[str]:
    """Each row of the tree page as it reads: its label, then its words."""
    rows = re.findall(r'class="tree-label">([^<]*)</span> ([^<]*)</button>', page)
    return [f"{label}: {text}" for label, text in rows]


@db
def test_the_tree_names_entries_in_words_and_cuts_their_text_at_a_word(signed_in, owner):
    from .test_browse import hand_off

    session = make_session(owner)
    say(session, "user", "Plan the **migration** " + "of the billing service " * 8)
    session.append(
        kind=Entry.Kind.THINKING_LEVEL_CHANGE, data={"fields": {"thinkingLevel": "high"}}
    )
    session.append_message("toolResult", [{"type": "text", "text": "3 files changed"}])
    session.append_custom_message("todo_note", "The user edited the todo list.", display=False)
    new = hand_off(session, "## Goal\nShip the billing migration")
    old_page = signed_in.get(reverse("chat:tree", args=[session.pk])).content.decode()
    new_page = signed_in.get(reverse("chat:tree", args=[new.pk])).content.decode()
    rows = tree_rows(old_page)
    assert rows[0] == (
        "You: Plan the migration of the billing service of the billing service of the billing"
        " service of the…"
    )
    assert rows[1:4] == [
        "Thinking level: high: ",
        "Tool result: 3 files changed",
        "Note: The user edited the todo list.",
    ]
    assert rows[4].startswith("Handoff request (agentweb): ")
    assert rows[4].endswith(" the document you…")
    assert rows[5] == "Handoff document (draft): Goal Ship the billing migration"
    assert tree_rows(new_page)[0] == "Handoff document: Goal Ship the billing migration"
    for page in (old_page, new_page):
        assert "handoff-context" not in page
        assert not re.search(r"CUSTOM|TOOL RESULT|THINKING LEVEL CHANGE", page)
