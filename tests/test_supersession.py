"""What was superseded stays behind (issue 54, item 2): a decision the user turned down later,
and a file deleted or renamed since, are not current. The guard never carries them over, the
offline document does not list them as decisions or files, and the panel says why."""

from __future__ import annotations

import pytest

from sessions import context, handoff
from sessions.coverage import coverage
from sessions.models import Entry
from sessions.offline import respond
from sessions.salience import items_of

from .test_offline_model import section

REJECTED = "We decided to use queueMessage instead of appendMessage for the follow-ups."


def said(role: str, text: str) -> Entry:
    return Entry(kind=Entry.Kind.MESSAGE, role=role, content=[{"type": "text", "text": text}])


def ran(call: str, command: str, output: str = "") -> list[Entry]:
    block = {"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": command}}
    result = Entry(
        kind=Entry.Kind.MESSAGE,
        role=Entry.Role.TOOL_RESULT,
        content=[{"type": "text", "text": output}],
        data={"message": {"toolCallId": call, "toolName": "bash", "isError": False}},
    )
    return [Entry(kind=Entry.Kind.MESSAGE, role="assistant", content=[block]), result]


SESSION = [
    said("user", "Wire the follow-up messages into src/agent/loop.ts, please."),
    said("assistant", REJECTED),
    said("user", f"{REJECTED} Good?"),  # the user repeats it back: named by them, salient
    said("user", "why would we queue and then append? Just append."),
    said("assistant", "Right: appending directly in src/agent/loop.ts."),
    said("user", "Move the draft into src/main-new.ts and keep it there for now."),
    *ran("c1", "rm src/main-new.ts && git mv docs/refactor.md docs/plan.md"),
    said("user", "Also see docs/refactor.md and src/main-new.ts for the old notes."),
    said("assistant", "Done: src/agent/loop.ts appends directly now."),
]


def found(items, text):
    return next(item for item in items if item.text == text)


def test_a_decision_the_user_turned_down_is_not_salient_and_says_why():
    items = items_of(SESSION)
    decision = found(items, REJECTED)
    assert decision.superseded == "rejected later (entry 4)"
    assert not decision.salient
    assert "rejected later (entry 4)" in decision.reasons


def test_a_file_deleted_or_renamed_since_is_not_salient_and_says_what_became_of_it():
    items = items_of(SESSION)
    assert found(items, "src/main-new.ts").superseded == "deleted later"
    assert found(items, "docs/refactor.md").superseded == "renamed to docs/plan.md"
    assert not found(items, "src/main-new.ts").salient
    assert found(items, "src/agent/loop.ts").salient  # still current


def test_the_guard_never_carries_over_what_was_superseded():
    dropped = [
        item.text for item in coverage(SESSION, "## Goal\nAppend follow-ups.").salient_dropped
    ]
    assert "src/agent/loop.ts" in dropped
    assert REJECTED not in dropped
    assert "src/main-new.ts" not in dropped and "docs/refactor.md" not in dropped
    assert handoff.also_carried_over([], 9) == ""


def test_the_offline_document_lists_no_rejected_decision_and_no_deleted_file():
    history = context.build_context(SESSION)  # as the model reads the session
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    assert "queueMessage" not in section(document, "Key Decisions")
    critical = section(document, "Critical Context")
    assert "src/main-new.ts" not in critical
    assert "src/agent/loop.ts" in critical


@pytest.mark.parametrize(
    "rejection",
    ["No, don't use queueMessage.", "Scrap that, we append.", "why would you queue them?"],
)
def test_each_way_of_turning_a_decision_down_supersedes_it(rejection):
    items = items_of([said("assistant", REJECTED), said("user", rejection)])
    assert found(items, REJECTED).superseded.startswith("rejected later")


def test_a_reply_that_says_no_to_something_else_supersedes_nothing():
    items = items_of([said("assistant", REJECTED), said("user", "Looks right. Ship it.")])
    assert found(items, REJECTED).superseded == ""


REPLACED = [
    said("user", "Set up the background jobs for the importer in src/jobs/queue.py."),
    said("assistant", "We decided to use Redis for the job queue."),
    said("user", "We decided to use Redis for the job queue. Good?"),  # named by them: salient
    said("user", "Let's use PostgreSQL for the job queue instead, one service less."),
    said("assistant", "Done: src/jobs/queue.py keeps the jobs in PostgreSQL now."),
]


def test_a_decision_replaced_by_a_later_one_is_not_current_and_says_by_which():
    items = items_of(REPLACED)
    redis = found(items, "We decided to use Redis for the job queue.")
    assert redis.superseded == "replaced later (entry 4)"
    assert not redis.salient
    postgresql = found(items, "Let's use PostgreSQL for the job queue instead, one service less.")
    assert postgresql.superseded == ""


def test_the_offline_document_gives_the_decision_that_replaced_the_other():
    history = context.build_context(REPLACED)
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    decisions = section(document, "Key Decisions")
    assert "PostgreSQL for the job queue" in decisions
    assert "Redis" not in document


def test_a_later_decision_about_something_else_replaces_nothing():
    items = items_of(
        [
            said("assistant", "We decided to use Redis for the job queue."),
            said("user", "Let's use pytest instead of unittest for the importer's checks."),
        ]
    )
    assert found(items, "We decided to use Redis for the job queue.").superseded == ""
