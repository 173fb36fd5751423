"""Lossless export: a session file imported and exported again is the same file, byte for byte,
on either database (only a version-1 file's entries get the ids they lacked, and a renamed
session's header its new title), and a second round trip changes nothing."""

from __future__ import annotations

import json
from functools import cache

import pytest

from bench.make_session import generate
from sessions import session_file
from sessions.models import ChatSession, Entry
from sessions.session_file.stringify import stringify

pytestmark = pytest.mark.django_db

EVERY_KIND = [
    {"type": "session", "version": 3, "id": "s-every-kind", "timestamp": "2025-02-01T10:00:00.000Z",
     "cwd": "/home/dev/work/gateway", "title": "Every kind", "provider": "anthropic",
     "modelId": "claude-sonnet-4-5", "thinkingLevel": "medium", "branchedFrom": "/tmp/old.jsonl",
     "parentSession": "s-before"},
    {"type": "message", "id": "u1", "parentId": None, "timestamp": "2025-02-01T10:00:01.000Z",
     "message": {"role": "user", "content": "Fix the parser, please.", "timestamp": 1706781601000}},
    {"type": "message", "id": "a1", "parentId": "u1", "timestamp": "2025-02-01T10:00:09Z",
     "message": {"role": "assistant", "content": [
         {"type": "thinking", "thinking": "Read it first.", "thinkingSignature": "sig"},
         {"type": "text", "text": "Reading it."},
         {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "parser.py"}}],
         "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
         "usage": {"input": 900, "output": 100, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1000,
                   "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
         "stopReason": "toolUse", "timestamp": 1706781609000}},
    {"type": "message", "id": "r1", "parentId": "a1", "timestamp": "2025-02-01T10:00:10Z",
     "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
                 "content": [{"type": "text", "text": "def parse(): ..."}], "isError": False,
                 "details": {"lines": 1}, "timestamp": 1706781610000}},
    {"type": "message", "id": "b1", "parentId": "r1", "timestamp": "2025-02-01T10:00:11Z",
     "message": {"role": "bashExecution", "command": "pytest -q", "output": "1 failed",
                 "exitCode": 1, "cancelled": False, "truncated": False, "timestamp": 1706781611000}},
    {"type": "message", "id": "b2", "parentId": "b1", "timestamp": "2025-02-01T10:00:12Z",
     "message": {"role": "bashExecution", "command": "env", "output": "SECRET=1", "exitCode": 0,
                 "excludeFromContext": True, "timestamp": 1706781612000}},
    {"type": "message", "id": "a2", "parentId": "b2", "timestamp": "2025-02-01T10:00:13Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "Half"}],
                 "stopReason": "aborted", "errorMessage": "Request was aborted",
                 "model": "claude-sonnet-4-5", "timestamp": 1706781613000}},
    {"type": "model_change", "id": "m1", "parentId": "a2", "timestamp": "2025-02-01T10:00:14Z",
     "provider": "anthropic", "modelId": "claude-opus-4-1"},
    {"type": "thinking_level_change", "id": "t1", "parentId": "m1",
     "timestamp": "2025-02-01T10:00:15Z", "thinkingLevel": "high"},
    {"type": "compaction", "id": "c1", "parentId": "t1", "timestamp": "2025-02-01T10:00:16Z",
     "summary": "## Goal\nFix the parser.", "firstKeptEntryId": "u1", "tokensBefore": 5000,
     "details": {"readFiles": ["parser.py"]}},
    {"type": "branch_summary", "id": "bs1", "parentId": "c1", "timestamp": "2025-02-01T10:00:17Z",
     "fromId": "a2", "summary": "Tried a regex first."},
    {"type": "label", "id": "l1", "parentId": "bs1", "timestamp": "2025-02-01T10:00:18Z",
     "targetId": "a1", "label": "before the fix"},
    {"type": "custom", "id": "x1", "parentId": "l1", "timestamp": "2025-02-01T10:00:19Z",
     "customType": "ext-state", "data": {"text": "shown", "nested": [{"a": [1, 2]}]},
     "display": True},
    {"type": "custom_message", "id": "cm1", "parentId": "x1", "timestamp": "2025-02-01T10:00:20Z",
     "customType": "reminder", "content": "Remember the tests.", "display": False,
     "details": {"source": "hook", "nested": {"list": [1, {"b": 2}]}}},
    {"type": "message", "id": "u2", "parentId": "cm1", "timestamp": "2025-02-01T10:00:21Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "Go on."},
                 {"type": "image", "mimeType": "image/png", "data": "iVBORw0K"}],
                 "timestamp": 1675245621000}},
]  # fmt: skip


def round_trip(owner, lines: list[str]) -> list[str]:
    """The lines of the export of the session imported from `lines`."""
    session = session_file.import_jsonl(owner, lines)
    return [line.rstrip("\n") for line in session_file.export_jsonl(session)]


@cache
def corpus(version: int) -> tuple[str, ...]:
    return tuple(generate(version=version))


def without_issued_ids(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in ("id", "parentId", "version")}


def stringified(line: dict) -> str:
    """A line as the reference agent writes it (JSON.stringify: no spaces, non-ASCII as is)."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def test_a_file_with_every_kind_comes_back_byte_for_byte(owner):
    lines = [stringified(line) for line in EVERY_KIND]
    assert round_trip(owner, lines) == lines
    spaced = [json.dumps(line) for line in EVERY_KIND]  # another writer's form, kept as well
    assert round_trip(owner, spaced) == spaced


def test_a_renamed_session_writes_its_title_in_the_files_own_order_of_fields(owner):
    session = session_file.import_jsonl(owner, [stringified(line) for line in EVERY_KIND])
    ChatSession.objects.filter(pk=session.pk).update(title="Parser, fixed")
    session.refresh_from_db()
    header, *rest = [line.rstrip("\n") for line in session_file.export_jsonl(session)]
    assert list(json.loads(header)) == list(EVERY_KIND[0])
    assert json.loads(header) == {**EVERY_KIND[0], "title": "Parser, fixed"}
    assert rest == [stringified(line) for line in EVERY_KIND[1:]]


def test_the_fields_an_export_used_to_lose_are_kept(owner):
    exported = [json.loads(line) for line in round_trip(owner, [json.dumps(x) for x in EVERY_KIND])]
    header, by_id = exported[0], {line["id"]: line for line in exported[1:]}
    assert (header["cwd"], header["provider"], header["thinkingLevel"]) == (
        "/home/dev/work/gateway", "anthropic", "medium",
    )  # fmt: skip
    assert (header["branchedFrom"], header["timestamp"]) == (
        "/tmp/old.jsonl", "2025-02-01T10:00:00.000Z",
    )  # fmt: skip
    assert by_id["a1"]["message"]["stopReason"] == "toolUse"
    assert by_id["u2"]["message"]["timestamp"] == 1675245621000  # its own: a year before its line
    assert "content" not in by_id["b1"]["message"]  # a bash execution has none
    assert by_id["u1"]["message"]["content"] == "Fix the parser, please."  # text, as given
    assert by_id["x1"]["display"] is True
    twice = [json.loads(line) for line in round_trip(owner, [json.dumps(x) for x in exported])]
    assert {line["id"]: line for line in twice[1:]}["x1"]["display"] is True


def test_the_generated_version_3_session_comes_back_byte_for_byte(owner):
    lines = list(corpus(3))
    assert round_trip(owner, lines) == lines


def test_the_generated_version_1_session_comes_back_with_the_ids_it_lacked(owner):
    lines = list(corpus(1))
    exported = round_trip(owner, lines)
    given = [json.loads(line) for line in lines]
    back = [json.loads(line) for line in exported]
    assert back[0]["version"] == 3 and back[0]["id"] == given[0]["id"]  # the session's own id
    assert all(line["id"] for line in back[1:])
    for old, new in zip(given, back, strict=True):
        if "firstKeptEntryIndex" in old:  # version 1's reference by line: written as an id
            index = old.pop("firstKeptEntryIndex")
            assert new.pop("firstKeptEntryId") == back[index]["id"]
        assert without_issued_ids(new) == without_issued_ids(old)
    assert round_trip(owner, exported) == exported


def test_a_version_1_files_numbers_come_back_as_javascript_writes_them(owner):
    # Lines as the reference agent wrote them (JSON.stringify): small costs without an
    # exponent down to 1e-6, 1e-7 with one, whole numbers without ".0".
    lines = [
        '{"type":"session","id":"s-v1","timestamp":"2025-01-01T10:00:00.000Z","cwd":"/w"}\n',
        '{"type":"message","timestamp":"2025-01-01T10:00:01.000Z","message":{"role":"user",'
        '"content":"Price it","timestamp":1735725601000}}\n',
        '{"type":"message","timestamp":"2025-01-01T10:00:02.000Z","message":{"role":"assistant",'
        '"content":[{"type":"text","text":"Priced."}],"api":"anthropic-messages",'
        '"provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":100,"output":2,'
        '"cacheRead":0,"cacheWrite":0,"totalTokens":102,"cost":{"input":0.000005,"output":1e-7,'
        '"cacheRead":0,"cacheWrite":0,"total":0.0000051,"scale":100}},"stopReason":"stop",'
        '"timestamp":1735725602000}}\n',
    ]
    exported = round_trip(owner, lines)
    # (each number alone: PostgreSQL's jsonb keeps an object's keys in an order of its own)
    for written in ('"input":0.000005', '"output":1e-7', '"total":0.0000051', '"scale":100'):
        assert written in exported[2], exported[2]
    assert "e-06" not in "".join(exported) and "100.0" not in "".join(exported)


@pytest.mark.parametrize(
    ("number", "written"),
    [
        (0.000005, "0.000005"), (1e-7, "1e-7"), (100.0, "100"), (1.5, "1.5"), (0.0, "0"),
        (1e21, "1e+21"), (1e20, "100000000000000000000"), (-2.5e-8, "-2.5e-8"),
        (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
        (float("nan"), "null"), (float("inf"), "null"),
    ],
)  # fmt: skip
def test_a_number_is_written_as_json_stringify_writes_it(number, written):
    assert stringify({"n": number}) == '{"n":' + written + "}"


def test_a_value_of_a_str_or_int_subclass_is_written_as_its_base():
    assert stringify({"kind": Entry.Kind.MESSAGE, "flag": True, "n": 3}) == (
        '{"kind":"message","flag":true,"n":3}'
    )


# A version-1 file as the reference agent writes it back once migrated (its migrateV1ToV2 and
# migrateV2ToV3, in place): each line's own fields in its own order, `id` and `parentId` after
# them, a compaction's `firstKeptEntryIndex` given as `firstKeptEntryId` after those, and the
# header's `version` after its fields.
VERSION_1 = [
    '{"type":"session","id":"s-v1","timestamp":"2025-01-01T10:00:00.000Z","cwd":"/w"}',
    '{"type":"message","timestamp":"2025-01-01T10:00:01.000Z","message":{"role":"user",'
    '"content":"Read the config","timestamp":1735725601000}}',
    '{"type":"message","timestamp":"2025-01-01T10:00:02.000Z","message":{"role":"assistant",'
    '"content":[{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a.json"}}],'
    '"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5",'
    '"usage":{"input":100,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":102,'
    '"cost":{"input":0.000005,"output":1e-7,"cacheRead":0,"cacheWrite":0,"total":0.0000051}},'
    '"stopReason":"toolUse","timestamp":1735725602000}}',
    '{"type":"message","timestamp":"2025-01-01T10:00:03.000Z","message":{"role":"toolResult",'
    '"toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"{}"}],'
    '"details":{"path":"a.json","lines":1},"isError":false,"timestamp":1735725603000}}',
    '{"type":"compaction","timestamp":"2025-01-01T10:00:04.000Z","summary":"## Goal\\nRead it.",'
    '"firstKeptEntryIndex":2,"tokensBefore":5000}',
]


def test_a_version_1_file_comes_back_as_the_reference_agent_migrates_it(owner):
    exported = round_trip(owner, VERSION_1)
    ids = [json.loads(line)["id"] for line in exported[1:]]
    parents = ["null", *(f'"{i}"' for i in ids[:-1])]
    assert exported[0] == VERSION_1[0][:-1] + ',"version":3}'
    for n, (given, back) in enumerate(zip(VERSION_1[1:4], exported[1:4], strict=True)):
        assert back == given[:-1] + f',"id":"{ids[n]}","parentId":{parents[n]}}}'
    assert exported[4] == (
        '{"type":"compaction","timestamp":"2025-01-01T10:00:04.000Z","summary":"## Goal\\nRead '
        f'it.","tokensBefore":5000,"id":"{ids[3]}","parentId":"{ids[2]}",'
        f'"firstKeptEntryId":"{ids[1]}"}}'
    )
    assert round_trip(owner, exported) == exported
