"""The model's context for an imported session: compactions, tool work, thinking, bash, images.

The reference agent's `buildSessionContext`, with tool work as labelled text (SPEC §5).
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from bench.make_session import generate
from sessions import context, session_file, store
from sessions.models import Entry

pytestmark = pytest.mark.django_db

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s1",
    "timestamp": "2025-01-01T00:00:00Z",
    "cwd": "/w",
}
ENTRIES = [
    {"type": "message", "id": "u1", "message": {"role": "user", "content": "Fix the parser."}},
    {"type": "message", "id": "a1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}], "stopReason": "stop", "usage": {"input": 900, "output": 100}}},
    {"type": "compaction", "id": "c1", "summary": "OLD SUMMARY", "firstKeptEntryId": "u1", "tokensBefore": 5000},
    {"type": "message", "id": "u2", "message": {"role": "user", "content": [{"type": "text", "text": "Now the tests."}, {"type": "image", "mimeType": "image/png", "data": "iVBORw0K"}]}},
    {"type": "message", "id": "a2", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Run them first."},
        {"type": "text", "text": "Running."},
        {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "npm test", "timeout": 60}},
    ], "stopReason": "toolUse", "usage": {"input": 1200, "output": 80, "cacheRead": 3000, "cacheWrite": 0}}},
    {"type": "message", "id": "r1", "message": {"role": "toolResult", "toolCallId": "t1", "toolName": "bash", "content": [{"type": "text", "text": "1 failed"}], "isError": True}},
    {"type": "message", "id": "a3", "message": {"role": "assistant", "content": [{"type": "text", "text": "One test fails."}], "stopReason": "stop"}},
    {"type": "compaction", "id": "c2", "summary": "NEW SUMMARY", "firstKeptEntryId": "u2", "tokensBefore": 9000},
    {"type": "message", "id": "b1", "message": {"role": "bashExecution", "command": "git diff", "output": "", "exitCode": 1, "cancelled": False, "truncated": False}},
    {"type": "message", "id": "b2", "message": {"role": "bashExecution", "command": "secret", "output": "x", "exitCode": 0, "excludeFromContext": True}},
    {"type": "branch_summary", "id": "s2", "fromId": "a3", "summary": "Tried a rewrite; dropped it."},
    {"type": "model_change", "id": "m1", "provider": "anthropic", "modelId": "claude-opus-4-1"},
    {"type": "custom_message", "id": "x1", "customType": "note", "content": "Remember the lockfile.", "display": True},
    {"type": "message", "id": "a4", "message": {"role": "assistant", "content": [{"type": "text", "text": "Half a repl"}], "stopReason": "error", "errorMessage": "overloaded"}},
    {"type": "message", "id": "u3", "message": {"role": "user", "content": "Go on."}},
]  # fmt: skip

EXPECTED = [
    {"role": "user", "content": [
        {"type": "text", "text": "The conversation history before this point was compacted into the following summary:\n\n<summary>\nNEW SUMMARY\n</summary>"},
        {"type": "text", "text": "Now the tests.\n[image: image/png]"},
    ]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "[Assistant thinking]: Run them first."},
        {"type": "text", "text": "Running."},
        {"type": "text", "text": '[Assistant tool call]: bash(command="npm test", timeout=60)'},
    ]},
    {"role": "user", "content": [{"type": "text", "text": "[Tool result: bash, error]: 1 failed"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "One test fails."}]},
    {"role": "user", "content": [
        {"type": "text", "text": "Ran `git diff`\n(no output)\n\nCommand exited with code 1"},
        {"type": "text", "text": "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nTried a rewrite; dropped it.</summary>"},
        {"type": "text", "text": "Remember the lockfile."},
        {"type": "text", "text": "Go on."},
    ]},
]  # fmt: skip


def version_3() -> list[str]:
    lines, parent = [json.dumps(HEADER)], None
    for entry in ENTRIES:
        lines.append(json.dumps({**entry, "parentId": parent, "timestamp": "2025-01-01T00:00:01Z"}))
        parent = entry["id"]
    return lines


def version_1() -> list[str]:
    """The same session as a version 1 file: no ids; compactions name the kept entry by index."""
    index = {entry["id"]: number for number, entry in enumerate(ENTRIES, start=1)}
    header = {k: v for k, v in HEADER.items() if k != "version"}
    lines = [json.dumps(header)]
    for entry in ENTRIES:
        line = {k: v for k, v in entry.items() if k != "id"}
        if "firstKeptEntryId" in line:
            line["firstKeptEntryIndex"] = index[line.pop("firstKeptEntryId")]
        lines.append(json.dumps({**line, "timestamp": "2025-01-01T00:00:01Z"}))
    return lines


@pytest.mark.parametrize("make_lines", [version_3, version_1], ids=["version 3", "version 1"])
def test_a_compacted_file_sends_the_latest_summary_then_the_kept_entries_then_the_rest(
    owner, make_lines
):
    session = session_file.import_jsonl(owner, make_lines())
    assert store.session_context(session) == EXPECTED


def test_a_compaction_whose_kept_entry_is_off_the_branch_sends_only_what_follows_it(owner):
    lines = version_3()
    compaction = json.loads(lines[8])
    assert compaction["id"] == "c2"
    lines[8] = json.dumps({**compaction, "firstKeptEntryId": "nowhere"})
    session = session_file.import_jsonl(owner, lines)
    messages = store.session_context(session)
    assert messages[0]["content"][0]["text"].endswith("NEW SUMMARY\n</summary>")
    assert messages[0]["content"][1]["text"].startswith("Ran `git diff`")


def test_export_names_the_kept_entry_by_its_new_id_and_imports_back_to_the_same_context(owner):
    session = session_file.import_jsonl(owner, version_1())
    exported = [line.rstrip("\n") for line in session_file.export_jsonl(session)]
    compactions = [json.loads(line) for line in exported if '"compaction"' in line]
    ids = {json.loads(line).get("id") for line in exported}
    assert all(c["firstKeptEntryId"] in ids and "firstKeptEntryIndex" not in c for c in compactions)
    again = session_file.import_jsonl(owner, exported)
    assert store.session_context(again) == EXPECTED


def test_bash_executions_keep_their_command_output_and_exit_code_through_export(owner):
    session = session_file.import_jsonl(owner, version_3())
    exported = [json.loads(line) for line in session_file.export_jsonl(session)]
    bash = next(line for line in exported if line.get("message", {}).get("role") == "bashExecution")
    assert {k: bash["message"][k] for k in ("command", "output", "exitCode")} == {
        "command": "git diff",
        "output": "",
        "exitCode": 1,
    }


def test_the_context_size_is_the_last_replys_usage_plus_an_estimate_of_what_follows(owner):
    lines = version_3()[:8]  # up to a3, before the second compaction
    session = session_file.import_jsonl(owner, lines)
    # a2 reported 1,200 + 80 + 3,000 tokens; a3 reports none, the tool result after it is estimated.
    tail = context.estimate_tokens(
        "[Tool result: bash, error]: 1 failed"
    ) + context.estimate_tokens("One test fails.")
    assert session.context_tokens == 4_280 + tail


def test_after_a_compaction_with_no_reply_since_the_whole_context_is_estimated(owner):
    session = session_file.import_jsonl(owner, version_3())
    parts = context.context_parts(store.get_branch(session))
    assert session.context_tokens == sum(part.tokens for part in parts)
    assert 0 < session.context_tokens < 200


def test_estimates_count_cjk_and_emoji_as_the_dense_text_they_are():
    assert context.estimate_tokens("abc") == 1
    assert context.estimate_tokens("请不要修改") == 5  # 15 bytes of UTF-8
    assert context.estimate_tokens("👍") == 2
    assert context.estimate_tokens("") == 0


# --- the generated 2 MB sessions ---------------------------------------------------------
@cache
def corpus(version: int) -> tuple[str, ...]:
    return tuple(generate(version=version))


def test_the_generated_sessions_are_long_real_looking_and_compacted_twice():
    for version in (1, 3):
        lines = corpus(version)
        kinds = [json.loads(line)["type"] for line in lines]
        roles = {json.loads(line).get("message", {}).get("role") for line in lines}
        assert len(lines) > 1_000 and len("\n".join(lines).encode()) > 2 * 1024 * 1024
        assert kinds.count("compaction") == 2 and "model_change" in kinds
        assert {"user", "assistant", "toolResult", "bashExecution"} <= roles
        text = "\n".join(lines)
        assert '"thinking"' in text and '"image"' in text and "请" in text and "👍" in text


def test_a_generated_version_1_file_and_its_version_3_twin_give_the_same_context(owner):
    twins = [session_file.import_jsonl(owner, list(corpus(v))) for v in (1, 3)]
    v1, v3 = (store.session_context(session) for session in twins)
    assert len(v1) == len(v3) > 300
    for number, (one, three) in enumerate(zip(v1, v3, strict=True)):
        assert one == three, f"message {number} differs"
    branch = store.get_branch(twins[1])
    second = [e for e in branch if e.kind == Entry.Kind.COMPACTION][-1]
    kept = Entry.objects.get(pk=second.data["refs"]["firstKeptEntryId"])
    assert v3[0]["content"][0]["text"].startswith("The conversation history before this point")
    assert v3[0]["content"][1]["text"] == kept.text  # the kept user message follows the summary
    texts = [block["text"] for message in v3 for block in message["content"]]
    assert any(t.startswith("[Tool result: read]: // ") for t in texts)
    assert any(t.startswith("[Assistant tool call]: edit(path=") for t in texts)
    assert any(t.startswith("Ran `scripts/load-test.sh --rate 5000`") for t in texts)
    assert any(t.startswith("Before we go on: run scripts/load-test.sh") for t in texts)
    assert texts[-1].startswith("[Tool result: bash, error]: > gateway@2.3.1 publish")  # its end


def test_a_branch_that_ends_on_an_unanswered_call_ends_with_its_synthetic_result():
    parts = context.answered(
        [
            context.Part("user", "run it", "text", 1),
            context.Part(
                "assistant",
                "[Assistant tool call]: bash()",
                "tool_call",
                2,
                name="bash",
                call_id="a",
            ),
            context.Part(
                "assistant",
                "[Assistant tool call]: read()",
                "tool_call",
                2,
                name="read",
                call_id="b",
            ),
            context.Part(
                "user", "[Tool result: read]: ok", "tool_result", 3, name="read", call_id="b"
            ),
        ]
    )
    assert [part.text for part in parts] == [
        "run it",
        "[Assistant tool call]: bash()",
        "[Assistant tool call]: read()",
        "[Tool result: read]: ok",
        "[Tool result: bash, error]: No result provided",
    ]


def test_a_reply_that_was_cancelled_or_failed_or_a_handoff_exchange_adds_nothing_to_the_context():
    def entry(**fields):
        return Entry(kind="message", content=[{"type": "text", "text": "x"}], **fields)

    assert context.entry_parts(entry(role="assistant", status="aborted")) == []
    assert context.entry_parts(entry(role="assistant", status="failed")) == []
    assert context.entry_parts(entry(role="user", data={"purpose": "handoff"})) == []
    assert context.entry_parts(entry(role="assistant", data={"purpose": "handoff"})) == []
    assert [p.text for p in context.entry_parts(entry(role="assistant"))] == ["x"]
