"""Session todos (issue 12): the list the agent keeps through its todo_write tool, stored in the
session's history (it follows the branch and the export); the tool loop against the fake
Anthropic server; the offline model's updates; the reminder; the reload after a handoff; the
user's own edits."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from sessions import checklists, generation, handoff, session_file, store, todos
from sessions.agent.tools import record_result
from sessions.forms import TodoEditForm
from sessions.models import ChatSession, Entry
from sessions.todos import Todo

from .conftest import db_async, make_session
from .fake_anthropic import Reply

PLAN = {
    "todos": [
        {"text": "Read the config loader", "state": "done"},
        {"text": "Rewrite the parser", "state": "in_progress"},
        {"text": "Run the test suite", "state": "pending"},
    ]
}
PLANNED = [
    Todo("Read the config loader", "done"),
    Todo("Rewrite the parser", "in_progress"),
    Todo("Run the test suite", "pending"),
]

DOCUMENT = """## Goal
Make the config parser fast.

## Constraints & Preferences
Python 3.11 only.

## Progress
### Done
- [x] Profiled the loader
### In Progress
- Rewriting `src/parser.py` with tomllib
### Pending
- Benchmarks for the 2 MB file
- [ ] Update the changelog

## Key Decisions
- tomllib over toml: it is in the standard library.

## Critical Context
`KeyError: 'id'` in `src/parser.py:88`.

## Next Steps
1. Finish the tomllib rewrite
2. Run `pytest -q tests/test_parser.py`
"""


def state_of(session: ChatSession) -> list[Todo]:
    return todos.state(ChatSession.objects.get(pk=session.pk)).todos


def model_sets(session: ChatSession, items: list[Todo], call_id: str = "toolu_1") -> None:
    """The model's todo_write, stored as the agent stores it."""
    arguments = {"todos": todos.as_dicts(items)}
    session.append_message(
        "assistant",
        [{"type": "toolCall", "id": call_id, "name": "todo_write", "arguments": arguments}],
    )
    record_result(session, call_id, "todo_write", todos.result_text(items), details=arguments)


def a_planned_session(owner) -> ChatSession:
    """A session whose model set PLANNED in reply to its first message."""
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "Plan it"}])
    model_sets(session, PLANNED)
    return session


# --- the list in the history ---------------------------------------------------------------
@pytest.mark.django_db
def test_the_list_follows_the_branch(owner):
    session = make_session(owner)
    question = session.append_message("user", [{"type": "text", "text": "Plan it"}])
    model_sets(session, PLANNED)
    assert state_of(session) == PLANNED

    session.move_leaf(question.pk)  # another branch from the question
    assert state_of(session) == []
    todos.append_list(session, [Todo("Something else")], "user")
    assert state_of(session) == [Todo("Something else")]

    session.switch_branch(store.siblings(store.get_branch(session)[-1]).previous)
    assert state_of(session) == PLANNED


@pytest.mark.django_db
def test_a_list_set_long_ago_on_the_branch_is_the_list_and_its_replies_since_are_counted(owner):
    session = a_planned_session(owner)
    for turn in range(130):  # 260 entries: further back than a walk up from the leaf reads
        session.append_message("user", [{"type": "text", "text": f"go on {turn}"}])
        session.append_message("assistant", [{"type": "text", "text": f"done {turn}"}])
    read = todos.state(ChatSession.objects.get(pk=session.pk))
    assert (read.todos, read.turns_since_update) == (PLANNED, 130)
    todos.append_list(session, [Todo("Fresh")], "user")
    session.append_message("assistant", [{"type": "text", "text": "seen"}])
    read = todos.state(ChatSession.objects.get(pk=session.pk))
    assert (read.todos, read.turns_since_update, read.unseen_user_change) == (
        [Todo("Fresh")],
        1,
        True,
    )


@pytest.mark.django_db
def test_an_error_result_leaves_the_list_as_it_was(owner):
    session = a_planned_session(owner)
    record_result(session, "toolu_2", "todo_write", "The todo list was not changed")
    Entry.objects.filter(pk=store.get_branch(session)[-1].pk).update(
        data={"message": {"toolCallId": "toolu_2", "toolName": "todo_write", "isError": True}}
    )
    assert state_of(session) == PLANNED


@pytest.mark.django_db
def test_the_list_round_trips_through_export_and_import(owner):
    session = a_planned_session(owner)
    todos.append_list(session, [*PLANNED, Todo("Tell the team")], "user")
    exported = "".join(session_file.export_jsonl(session))
    lines = [json.loads(line) for line in exported.splitlines()]
    custom = [line for line in lines if line["type"] == "custom"]
    assert custom[-1]["customType"] == "todos"
    assert custom[-1]["data"]["todos"][-1] == {"text": "Tell the team", "state": "pending"}
    result = next(line for line in lines if line.get("message", {}).get("role") == "toolResult")
    assert result["message"]["toolName"] == "todo_write"
    assert result["message"]["details"] == {"todos": todos.as_dicts(PLANNED)}

    imported = session_file.import_jsonl(owner, exported.splitlines())
    assert state_of(imported) == [*PLANNED, Todo("Tell the team")]
    imported.move_leaf(store.get_branch(imported)[-2].pk)  # before the user's edit
    assert state_of(imported) == PLANNED


# --- the tool loop with Claude ---------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tool_call_updates_the_list_and_the_model_goes_on(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("todo_write", PLAN, text="Here is the plan."),
        Reply.text("Starting on the parser now."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Make the config parser fast")
    html = await tab.until("Starting on the parser now.</p>")
    assert "3 open of 3" not in html  # one item is done
    assert "2 open of 3" in html  # the panel, live
    assert 'aria-label="Item 2">Rewrite the parser</textarea>' in html
    await generation.wait_idle()

    first, second = (request["json"] for request in fake_anthropic.requests)
    assert [tool["name"] for tool in first["tools"]] == ["todo_write", "handoff"]
    assert first["tools"][0]["input_schema"]["required"] == ["todos"]
    call, result = second["messages"][-2:]
    assert call == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Here is the plan."},
            {"type": "tool_use", "id": "toolu_fake_1", "name": "todo_write", "input": PLAN},
        ],
    }
    assert result == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_fake_1",
                "content": "Todo list updated. 3 items: 1 done, 1 in progress, 1 pending.",
            }
        ],
    }
    assert await db_async(state_of)(session) == PLANNED
    branch = await db_async(store.get_branch)(session)
    assert [(e.role, e.status) for e in branch] == [
        ("user", "complete"),
        ("assistant", "complete"),
        ("toolResult", "complete"),
        ("assistant", "complete"),
    ]
    assert branch[1].content[-1] == {
        "type": "toolCall", "id": "toolu_fake_1", "name": "todo_write", "arguments": PLAN
    }  # fmt: skip


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_context_after_the_loop_is_the_one_a_fresh_build_gives(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("todo_write", PLAN), Reply.text("On it."), Reply.text("Still on it.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan the work")
    await tab.until("On it.</p>")
    await generation.wait_idle()
    await tab.send(message="And now?")
    await tab.until("Still on it.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[-1]["json"]["messages"]
    fresh = await db_async(store.session_context)(
        await db_async(ChatSession.objects.get)(pk=session.pk)
    )
    assert sent == fresh[: len(sent)]
    assert "[Assistant tool call]: todo_write(todos=" in json.dumps(sent)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_malformed_input_gets_an_error_result_the_model_corrects(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    wrong_state = {"todos": [{"text": "Rewrite the parser", "state": "finished"}]}
    fake_anthropic.enqueue(
        Reply.tool("todo_write", None, raw='{"todos": [{"text": "Rewrite'),
        Reply.tool("todo_write", wrong_state),
        Reply.tool("todo_write", PLAN),
        Reply.text("Fixed the list."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan the work")
    await tab.until("Fixed the list.</p>")
    await generation.wait_idle()
    results = [r["json"]["messages"][-1]["content"][0] for r in fake_anthropic.requests[1:]]
    assert results[0]["is_error"] is True
    assert results[0]["content"] == 'The input is not valid JSON: \'{"todos": [{"text": "Rewrite\''
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "toolu_fake_0",
        "content": "The todo list was not changed: item 1: `state` must be one of pending, "
        "in_progress, done, not 'finished'.",
        "is_error": True,
    }
    assert "is_error" not in results[2]
    assert await db_async(state_of)(session) == PLANNED


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancel_in_the_middle_of_the_loop(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("todo_write", PLAN), Reply.held(["Rewriting"], [" the parser now."])
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan and start")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)  # the second round streams
    await tab.send(action="cancel")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect)
    await tab.until("Cancelled")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 2
    branch = await db_async(store.get_branch)(session)
    assert [(e.role, e.status) for e in branch] == [
        ("user", "complete"),
        ("assistant", "complete"),
        ("toolResult", "complete"),
        ("assistant", "aborted"),
    ]
    assert branch[-1].text == "Rewriting"
    assert await db_async(state_of)(session) == PLANNED
    assert not (await db_async(ChatSession.objects.get)(pk=session.pk)).is_generating


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_loop_stops_at_its_bound(owner, fake_anthropic, open_tab, settings):
    settings.AGENTWEB_MAX_TOOL_ROUNDS = 2
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(*[Reply.tool("todo_write", PLAN) for _ in range(3)])
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan forever")
    await tab.until("Stopped after 2 rounds of tool calls in one reply")
    await generation.wait_idle()
    assert len(fake_anthropic.requests) == 2
    branch = await db_async(store.get_branch)(session)
    assert [e.role or e.custom_type for e in branch] == [
        "user", "assistant", "toolResult", "assistant", "toolResult", "tool_limit"
    ]  # fmt: skip


async def planned_in_one_round(owner, fake_anthropic, open_tab, *, calls: int):
    """A reply that calls todo_write `calls` times in one round, then says "Planned."."""
    round_ = Reply(chunks=["Planning."], tool_uses=[("todo_write", json.dumps(PLAN))] * calls)
    fake_anthropic.enqueue(round_, Reply.text("Planned."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message=f"Plan it {calls} times over")
    await tab.until("Planned.")
    await generation.wait_idle()
    return session, tab


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_round_runs_at_most_32_calls_and_answers_the_rest_with_an_error(
    owner, fake_anthropic, open_tab
):
    session, _ = await planned_in_one_round(owner, fake_anthropic, open_tab, calls=40)
    results = fake_anthropic.requests[1]["json"]["messages"][-1]["content"]
    assert [result.get("is_error", False) for result in results] == [False] * 32 + [True] * 8
    assert results[-1]["content"] == (
        "Not run: a round runs at most 32 tool calls; make this call again in the next round."
    )
    stored = await db_async(
        lambda: Entry.objects.filter(session=session, role="toolResult").count()
    )()
    assert stored == 40


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_each_result_shows_its_own_call_not_the_whole_reply_again(
    owner, fake_anthropic, open_tab
):
    session, tab = await planned_in_one_round(owner, fake_anthropic, open_tab, calls=6)
    reply = await db_async(
        lambda: Entry.objects.get(session=session, role="assistant", content__0__text="Planning.")
    )()
    whole_reply = f'<article id="entry-{reply.pk}"'
    frames = [
        frame for frame in tab.received if whole_reply in frame or f'id="tool-{reply.pk}-' in frame
    ]
    assert sum(whole_reply in frame for frame in frames) == 1  # shown once, as it ended
    for index in range(1, 7):  # then each call's result in its own place (the text is block 0)
        assert (
            sum(f'<details id="tool-{reply.pk}-{index}" hx-swap-oob="true"' in f for f in frames)
            == 1
        )


# --- the reminder --------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_reminder_comes_after_n_turns_and_resets_on_an_update(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_TODO_REMINDER_TURNS = 2
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("todo_write", PLAN),
        Reply.text("Planned."),  # 1 reply since the update
        Reply.text("Turn two."),  # 2
        Reply.text("Turn three."),  # reminded before it
        Reply.text("Turn four."),
        Reply.tool("todo_write", PLAN),  # turn five updates the list
        Reply.text("Updated."),
        Reply.text("Turn six."),
    )
    _, tab = await open_tab(owner, session)
    for message, answer in [
        ("Plan it", "Planned."),
        ("Go on", "Turn two."),
        ("Go on", "Turn three."),
        ("Go on", "Turn four."),
        ("Go on", "Updated."),
        ("Go on", "Turn six."),
    ]:
        await tab.send(message=message)
        await tab.until(f"{answer}</p>")
        await generation.wait_idle()
    reminded = [
        "Reminder: 2 items of the todo list stayed open for 2 replies"
        in json.dumps(r["json"]["messages"][-1])
        for r in fake_anthropic.requests
    ]
    # Requests: plan (the update), planned, two, three, four, five (an update), updated, six.
    # A reminder counts as an update: two replies later comes the next, unless the model
    # updated the list meanwhile.
    assert reminded == [False, False, False, True, False, True, False, False]
    assert "Reminded the model of its open todo items" in "".join(tab.received)
    last = fake_anthropic.requests[3]["json"]["messages"][-1]
    assert last["role"] == "user"
    assert [block["text"].split("\n")[0] for block in last["content"]] == [
        "Go on",
        "Reminder: 2 items of the todo list stayed open for 2 replies without an update. "
        "If your work moved them on, update the list with todo_write; if they no longer "
        "apply, remove them.",
    ]


@pytest.mark.django_db
def test_a_handoff_resets_the_counter_and_seeds_the_list(owner):
    old = make_session(owner, exchanges=3)
    old.append_message("user", [{"type": "text", "text": "Plan it"}])
    model_sets(old, PLANNED)
    branch = store.get_branch(old)
    new = handoff.new_session(
        old,
        from_entry=branch[-1],
        content=f"<handoff-context>\n{DOCUMENT}\n</handoff-context>",
        data={},
    )
    seeded = todos.state(new)
    assert seeded.todos == [
        Todo("Rewriting `src/parser.py` with tomllib", "in_progress"),
        Todo("Benchmarks for the 2 MB file", "pending"),
        Todo("Update the changelog", "pending"),
        Todo("Finish the tomllib rewrite", "pending"),
        Todo("Run `pytest -q tests/test_parser.py`", "pending"),
    ]
    assert seeded.turns_since_update == 0
    assert not seeded.unseen_user_change


# --- reload after a handoff ---------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_after_a_handoff_the_new_session_has_the_documents_open_work(
    owner, fake_anthropic, open_tab, client
):
    session = await db_async(make_session)(owner, exchanges=2)
    fake_anthropic.enqueue(Reply.text(DOCUMENT), Reply.tool("todo_write", PLAN), Reply.text("Ok."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    await generation.wait_idle()
    new = await db_async(lambda: ChatSession.objects.get(parent_session=session))()
    assert [todo.text for todo in await db_async(state_of)(new)] == [
        "Rewriting `src/parser.py` with tomllib",
        "Benchmarks for the 2 MB file",
        "Update the changelog",
        "Finish the tomllib rewrite",
        "Run `pytest -q tests/test_parser.py`",
    ]
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(new.get_absolute_url())).content.decode()
    assert '">Benchmarks for the 2 MB file</textarea>' in page
    assert "5 open of 5" in page

    # The model's own list, written afterwards, wins.
    _, new_tab = await open_tab(owner, new)
    await new_tab.send(message="Go on")
    await new_tab.until("Ok.</p>")
    await generation.wait_idle()
    assert await db_async(state_of)(new) == PLANNED


# --- offline ------------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_offline_model_keeps_the_list_from_todo_lines_and_checklists(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.send(
        message="Plan:\n- [ ] Read the config\n- [x] Install deps\ntodo: Write the parser"
    )
    html = await tab.until("Todo list updated. 3 items: 1 done, 2 pending.")
    await generation.wait_idle()
    assert "2 open of 3" in "".join(tab.received)
    assert await db_async(state_of)(session) == [
        Todo("Read the config"),
        Todo("Install deps", "done"),
        Todo("Write the parser"),
    ]
    assert "todo_write: 3 items: 1 done, 2 pending</code>" in html  # the call, as Claude's is

    await tab.send(message="- [x] Read the config\n- [~] Write the parser")
    await tab.until("1 in progress")
    await generation.wait_idle()
    assert await db_async(state_of)(session) == [
        Todo("Read the config", "done"), Todo("Install deps", "done"),
        Todo("Write the parser", "in_progress"),
    ]  # fmt: skip
    await tab.send(message="No list in this one")
    await tab.until("No list in this one")
    await generation.wait_idle()
    assert len(await db_async(state_of)(session)) == 3


# --- the user's edits ------------------------------------------------------------------------
def panel_post(items: list[Todo], op: str = "save", done: tuple[int, ...] = (), new: str = ""):
    return {
        "text": [todo.text for todo in items],
        "state": [todo.state for todo in items],
        "done": [str(index) for index in done],
        "op": op,
        "new": new,
    }


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_model_sees_the_users_edit_on_its_next_turn(
    owner, fake_anthropic, open_tab, async_client
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("todo_write", PLAN), Reply.text("Planned."), Reply.text("Ok.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan it")
    await tab.until("Planned.</p>")
    await generation.wait_idle()
    await async_client.aforce_login(owner)
    url = reverse("chat:todos", args=[session.pk])
    response = await async_client.post(
        url, panel_post(PLANNED, done=(0, 1)), headers={"HX-Request": "true"}
    )
    assert response.status_code == 204
    await tab.until("1 open of 3")  # every tab's panel
    await tab.send(message="Go on")
    await tab.until("Ok.</p>")
    await generation.wait_idle()
    last = fake_anthropic.requests[-1]["json"]["messages"][-1]["content"]
    assert [block["text"] for block in last] == [
        "Go on",
        "The user edited the todo list. It is now:\n"
        "- [x] Read the config loader\n- [x] Rewrite the parser\n- [ ] Run the test suite",
    ]
    assert "Told the model of your change to the todo list" in "".join(tab.received)


@pytest.mark.django_db
def test_the_panel_edits_tick_add_remove_and_move(client, owner):
    session = make_session(owner)
    client.force_login(owner)
    url = reverse("chat:todos", args=[session.pk])
    client.post(url, panel_post([], op="add", new="  Write   the docs "))
    client.post(url, panel_post(state_of(session), op="add", new="Ship it"))
    assert state_of(session) == [Todo("Write the docs"), Todo("Ship it")]
    client.post(url, panel_post(state_of(session), op="down:0"))
    assert state_of(session) == [Todo("Ship it"), Todo("Write the docs")]
    client.post(url, panel_post(state_of(session), done=(1,)))
    assert state_of(session) == [Todo("Ship it"), Todo("Write the docs", "done")]
    client.post(url, panel_post(state_of(session)))  # unticked
    assert state_of(session) == [Todo("Ship it"), Todo("Write the docs")]
    client.post(url, panel_post(state_of(session), op="remove:0"))
    assert state_of(session) == [Todo("Write the docs")]


@pytest.mark.django_db
def test_a_bad_panel_post_changes_nothing_and_says_why(client, owner, other_user):
    session = make_session(owner)
    todos.append_list(session, [Todo("Keep me")], "user")
    client.force_login(owner)
    url = reverse("chat:todos", args=[session.pk])
    htmx = {"HX-Request": "true"}
    bad = {"text": ["a", "b"], "state": ["pending"], "op": "save"}
    assert (
        "could not be read: reload the page" in client.post(url, bad, headers=htmx).content.decode()
    )
    bad = panel_post([Todo("x" * 501)])
    assert "at most 500 characters" in client.post(url, bad, headers=htmx).content.decode()
    bad = panel_post([Todo("a")], op="add", new="")
    assert "Write the new item first." in client.post(url, bad, headers=htmx).content.decode()
    ChatSession.objects.filter(pk=session.pk).update(
        generation_id="running", generation_lease_until=timezone.now() + timedelta(minutes=1)
    )
    busy = client.post(url, panel_post([Todo("Changed")]), headers=htmx).content.decode()
    assert "Wait for the reply to end (or cancel it) to edit the todo list" in busy
    assert state_of(session) == [Todo("Keep me")]
    client.force_login(other_user)
    assert client.post(url, panel_post([Todo("Theirs")])).status_code == 404


# --- reading lists -----------------------------------------------------------------------
def test_a_handoff_documents_open_work_becomes_the_list():
    assert checklists.from_document(DOCUMENT) == [
        Todo("Rewriting `src/parser.py` with tomllib", "in_progress"),
        Todo("Benchmarks for the 2 MB file"),
        Todo("Update the changelog"),
        Todo("Finish the tomllib rewrite"),
        Todo("Run `pytest -q tests/test_parser.py`"),
    ]
    assert checklists.from_document("## Goal\nNothing.\n\n## Next Steps\nNone yet.") == []


def test_the_tool_input_is_checked_item_by_item():
    with pytest.raises(todos.TodoInputError, match=r'^the input must be \{"todos"'):
        todos.parse_input({"items": []})
    with pytest.raises(todos.TodoInputError, match="^item 2: `text` must be non-empty text$"):
        todos.parse_input(
            {"todos": [{"text": "a", "state": "done"}, {"text": " ", "state": "done"}]}
        )
    with pytest.raises(todos.TodoInputError, match="^at most 100 items, not 101$"):
        todos.parse_input({"todos": [{"text": "a", "state": "done"}] * 101})
    assert todos.parse_input({"todos": []}) == []


def test_the_panel_form_says_where_the_focus_goes():
    from django.http import QueryDict

    def apply(op: str) -> tuple[list[Todo], str]:
        data = QueryDict(mutable=True)
        data.setlist("text", ["a", "b", "c"])
        data.setlist("state", ["pending"] * 3)
        data["op"] = op
        form = TodoEditForm(data)
        assert form.is_valid(), form.problem()
        return form.apply()

    assert apply("up:2") == ([Todo("a"), Todo("c"), Todo("b")], "todo-up-1")
    assert apply("up:1") == ([Todo("b"), Todo("a"), Todo("c")], "todo-text-0")
    assert apply("down:1") == ([Todo("a"), Todo("c"), Todo("b")], "todo-text-2")
    assert apply("remove:2") == ([Todo("a"), Todo("b")], "todo-text-1")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_offline_the_list_carries_over_after_a_handoff(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.send(
        message="Plan:\n- [ ] Read the config\n- [x] Install deps\ntodo: Write the parser"
    )
    await tab.until("Todo list updated.")
    await generation.wait_idle()
    await tab.send(message="- [~] Read the config")
    await tab.until("1 in progress")
    await generation.wait_idle()
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    await generation.wait_idle()
    old_branch = await db_async(store.get_branch)(session)
    request = next(e for e in old_branch if e.data.get("purpose") == "handoff" and e.role == "user")
    assert request.text.endswith(
        "The session's todo list, as it stands:\n"
        "- [~] Read the config\n- [x] Install deps\n- [ ] Write the parser\n"
        "Carry it over: in Progress, list its open items as unchecked checklist items "
        "(`- [ ] …`, `- [~] …` for one in progress) and its finished ones as checked (`- [x] …`)."
    )
    new = await db_async(lambda: ChatSession.objects.get(parent_session=session))()
    carried = await db_async(state_of)(new)
    assert carried[:2] == [Todo("Read the config", "in_progress"), Todo("Write the parser")]
    assert Todo("Install deps", "done") not in carried


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancel_before_the_call_is_complete_runs_no_tool(owner, fake_anthropic, open_tab):
    session = await db_async(make_session)(owner)
    calling = Reply.tool("todo_write", PLAN)
    calling.chunks, calling.hold_after = ["Planning", " the work."], 1
    fake_anthropic.enqueue(calling)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan it")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(action="cancel")
    await tab.until("Cancelled")
    await generation.wait_idle()
    branch = await db_async(store.get_branch)(session)
    assert [(e.role, e.status) for e in branch] == [("user", "complete"), ("assistant", "aborted")]
    assert branch[-1].content == [{"type": "text", "text": "Planning"}]
    assert len(fake_anthropic.requests) == 1
    assert await db_async(state_of)(session) == []


def test_an_unknown_tool_or_bad_json_is_an_error_result_not_an_exception():
    from sessions.agent.tools import run_tool
    from sessions.providers import ToolCall

    session = ChatSession()  # todo_write reads nothing of it
    unknown = run_tool(ToolCall("toolu_1", "bash", {"command": "ls"}), session)
    assert (unknown.text, unknown.is_error) == (
        "Unknown tool 'bash': the tools are todo_write, recall, handoff.",
        True,
    )
    broken = run_tool(ToolCall("toolu_2", "todo_write", None, raw='{"todos": ['), session)
    assert (broken.text, broken.is_error) == ("The input is not valid JSON: '{\"todos\": ['", True)
    fine = run_tool(
        ToolCall("toolu_3", "todo_write", {"todos": [{"text": "a", "state": "done"}]}), session
    )
    assert (fine.text, fine.is_error, fine.details) == (
        "Todo list updated. 1 item: 1 done.",
        False,
        {"todos": [{"text": "a", "state": "done"}]},
    )


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_with_thinking_the_loop_sends_the_signed_thinking_back(
    owner, fake_anthropic, open_tab
):
    session = await db_async(make_session)(owner)
    await db_async(session.change_thinking)("low")
    thinking_call = Reply.tool("todo_write", PLAN)
    thinking_call.thinking, thinking_call.signature = ["Three steps."], "sig-1"
    fake_anthropic.enqueue(thinking_call, Reply.text("Planned."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan it")
    await tab.until("Planned.</p>")
    await generation.wait_idle()
    call = fake_anthropic.requests[1]["json"]["messages"][-2]
    assert call["content"][0] == {
        "type": "thinking",
        "thinking": "Three steps.",
        "signature": "sig-1",
    }
    assert call["content"][1]["type"] == "tool_use"
    assert fake_anthropic.requests[1]["json"]["thinking"]["budget_tokens"] == 2048


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_offline_a_users_order_survives_replies_and_a_handoff_seeds_work_items_only(
    owner, open_tab, async_client
):
    session = await db_async(make_session)(owner, model="local")
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan:\n- [ ] Read the config\n- [ ] Write the parser\n- [ ] Ship it")
    await tab.until("Todo list updated.")
    await generation.wait_idle()
    await async_client.aforce_login(owner)
    url = reverse("chat:todos", args=[session.pk])
    reordered = [Todo("Ship it"), Todo("Read the config"), Todo("Write the parser")]
    await async_client.post(url, panel_post(await db_async(state_of)(session), op="up:2"))
    await async_client.post(url, panel_post(await db_async(state_of)(session), op="up:1"))
    assert await db_async(state_of)(session) == reordered
    await tab.send(message="Nothing about the list here")
    await tab.until("Nothing about the list here")
    await generation.wait_idle()
    await tab.send(message="- [x] Read the config")
    await tab.until("1 done")
    await generation.wait_idle()
    assert await db_async(state_of)(session) == [
        Todo("Ship it"), Todo("Read the config", "done"), Todo("Write the parser"),
    ]  # fmt: skip
    await async_client.post(
        url, panel_post(await db_async(state_of)(session), op="up:2", done=(1,))
    )
    await tab.send(message="/handoff focus on tests")  # the edit's note goes out with it
    await tab.until("data-url=")
    await generation.wait_idle()
    new = await db_async(lambda: ChatSession.objects.get(parent_session=session))()
    assert [todo.text for todo in await db_async(state_of)(new)] == [
        "Ship it",
        "Write the parser",
    ]
