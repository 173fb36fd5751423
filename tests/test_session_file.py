"""Export as Markdown and the reference agent's JSONL; import of every file version, all or nothing."""

from __future__ import annotations

import html
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from sessions import handoff, session_file, store
from sessions.models import ChatSession, Entry
from sessions.session_file import reading

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def handed_off_session(owner) -> ChatSession:
    old = make_session(owner, exchanges=1)
    reply = old.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nShip."}], data={"purpose": "handoff"}
    )
    new = handoff.new_session(
        old, from_entry=reply, content=handoff.wrap("## Goal\nShip."), data={"warnings": []}
    )
    new.append_message("user", [{"type": "text", "text": "go on"}])
    new.append_message(
        "assistant", [{"type": "text", "text": "half"}], status="aborted", error="cancelled"
    )
    new.append_custom("interrupted", "A reply was interrupted.")
    return new


def upload(client, name: str, data: bytes):
    return client.post(
        reverse("chat:import"), {"file": SimpleUploadedFile(name, data)}, follow=True
    )


def shape(session: ChatSession) -> list[tuple]:
    entries = list(Entry.objects.filter(session=session).order_by("id"))
    index = {e.pk: i for i, e in enumerate(entries)}
    return [
        (index.get(e.parent_id), e.kind, e.role, e.custom_type, e.display, e.text, e.status)
        for e in entries
    ]


def test_export_then_import_keeps_the_tree_kinds_custom_types_and_display_flags(signed_in, owner):
    original = handed_off_session(owner)
    exported = b"".join(
        chunk if isinstance(chunk, bytes) else chunk.encode()
        for chunk in signed_in.get(
            reverse("chat:export_jsonl", args=[original.pk])
        ).streaming_content
    )
    header = json.loads(exported.splitlines()[0])
    assert header["type"] == "session" and header["version"] == 3
    assert header["parentSession"] == f"agentweb-{original.parent_session_id}"
    first_entry = json.loads(exported.splitlines()[1])
    assert first_entry["type"] == "custom_message" and first_entry["customType"] == "handoff"
    assert first_entry["parentId"] is None and len(first_entry["id"]) == 8

    response = upload(signed_in, "session.jsonl", exported)
    imported = ChatSession.objects.exclude(pk__in=[original.pk, original.parent_session_id]).get()
    assert response.redirect_chain[-1][0] == imported.get_absolute_url()
    assert shape(imported) == shape(original)
    assert store.session_context(imported) == store.session_context(original)
    assert imported.leaf.text == original.leaf.text


def test_the_markdown_export_reads_as_the_transcript(signed_in, owner):
    session = handed_off_session(owner)
    response = signed_in.get(reverse("chat:export_md", args=[session.pk]))
    text = response.content.decode()
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="agentweb-session-{session.pk}.md"'
    )
    assert text.index("## Handoff document\n\n## Goal\nShip.") < text.index("## You\n\ngo on")
    assert "## Assistant (aborted)\n\nhalf" in text


def test_the_markdown_export_names_each_entry_in_words_not_the_files_role_names(owner):
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "Read it."}])
    call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}}
    session.append_message("assistant", [call])
    session.append(
        kind=Entry.Kind.MESSAGE,
        role=Entry.Role.TOOL_RESULT,
        content=[{"type": "text", "text": "print(1)"}],
        data={"message": {"toolCallId": "c1", "toolName": "read", "isError": False}},
    )
    text = session_file.export_markdown(session)
    assert "## You\n\nRead it." in text
    assert "## Tool result (read)\n\nprint(1)" in text
    assert "toolResult" not in text


def test_another_users_session_cannot_be_exported(signed_in, other_user):
    theirs = make_session(other_user, exchanges=1)
    assert signed_in.get(reverse("chat:export_jsonl", args=[theirs.pk])).status_code == 404


def lines(*objects) -> bytes:
    return "\n".join(json.dumps(o) for o in objects).encode()


def test_a_version_1_file_is_one_linear_branch_and_can_be_continued(owner):
    data = lines(
        {"type": "session", "id": "abc", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01Z", "message": {"role": "user", "content": "Hello\nthere", "timestamp": 1}},
        {"type": "model_change", "timestamp": "2025-01-01T00:00:02Z", "provider": "anthropic", "modelId": "claude-x"},
        {"type": "message", "timestamp": "2025-01-01T00:00:03Z", "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hi"}], "usage": {"input": 10, "output": 2}, "stopReason": "stop"}},
    )  # fmt: skip
    session = session_file.import_jsonl(owner, data.decode().splitlines())
    branch = store.get_branch(session)
    assert [e.kind for e in branch] == ["message", "model_change", "message"]
    assert branch[1].data["fields"]["modelId"] == "claude-x"
    assert session.title == "Hello"
    assert (session.imported_model, session.cwd, session.model) == (
        "anthropic/claude-x",
        "/w",
        "local",
    )
    assert store.session_context(session) == [
        {"role": "user", "content": [{"type": "text", "text": "Hello\nthere"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "[Assistant thinking]: hm"},
                {"type": "text", "text": "Hi"},
            ],
        },
    ]


def test_an_imported_session_is_titled_as_a_new_one_is_at_a_word_boundary(owner):
    first = "## Please look at the failing build: the config lives in src/settings.py and the tests"
    data = lines(
        {"type": "session", "id": "abc", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01Z", "message": {"role": "user", "content": first, "timestamp": 1}},
    )  # fmt: skip
    session = session_file.import_jsonl(owner, data.decode().splitlines())
    assert session.title == (
        "Please look at the failing build: the config lives in src/settings.py and the…"
    )


def test_a_version_3_tree_keeps_its_branches_and_the_last_entry_is_the_leaf(owner):
    data = lines(
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z", "cwd": ""},
        {"type": "message", "id": "a1", "parentId": None, "timestamp": "2025-01-01T00:00:01Z", "message": {"role": "user", "content": "root"}},
        {"type": "message", "id": "b2", "parentId": "a1", "timestamp": "2025-01-01T00:00:02Z", "message": {"role": "assistant", "content": "abandoned"}},
        {"type": "label", "id": "c3", "parentId": "a1", "timestamp": "2025-01-01T00:00:03Z", "targetId": "a1", "label": "start"},
        {"type": "custom_message", "id": "d4", "parentId": "c3", "timestamp": "2025-01-01T00:00:04Z", "customType": "note", "content": "kept", "display": False},
    )  # fmt: skip
    session = session_file.import_jsonl(owner, data.decode().splitlines())
    assert [e.text for e in store.get_branch(session)] == ["root", "start", "kept"]
    assert Entry.objects.filter(session=session).count() == 4
    note = store.get_branch(session)[-1]
    assert (note.custom_type, note.display) == ("note", False)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"type":"session","version":3}\n{"type":"message", broken', "Line 2: not valid JSON"),
        (lines({"type": "session"}, {"type": "teleport", "id": "a", "parentId": None}), "Line 2: unknown entry type 'teleport'"),
        (lines({"type": "message", "message": {}}), "Line 1: the session header must be the first line"),
        (
            lines(
                {"type": "session", "version": 3},
                {"type": "message", "id": "a", "parentId": "b", "message": {"role": "user", "content": "x"}},
                {"type": "message", "id": "b", "parentId": "a", "message": {"role": "user", "content": "y"}},
            ),
            "Line 2: parentId forms a cycle",
        ),
        (
            lines({"type": "session", "version": 3}, {"type": "message", "id": "a", "parentId": "zz", "message": {"role": "user", "content": "x"}}),
            "Line 2: parentId 'zz' is not an entry of this file",
        ),
        (
            lines(
                {"type": "session", "version": 2},
                {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "x"}},
                {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "y"}},
            ),
            "Line 3: id 'a' was already used on line 2",
        ),
        (b"\xff\xfe not text", "not UTF-8"),
        (b"", "Line 1: the file is empty"),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "assistant", "content": "x", "usage": {"input": "lots"}}}), "Line 2: the message's `usage.input` must be a whole, non-negative number."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "assistant", "content": "x", "usage": {"input": -5, "output": 1}}}), "Line 2: the message's `usage.input` must be a whole, non-negative number."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "assistant", "content": "x", "usage": [1, 2]}}), "Line 2: the message's `usage` must be an object."),
        (lines({"type": "session"}, {"type": "message", "timestamp": "2025-13-45T25:61:00Z", "message": {"role": "user", "content": "x"}}), "Line 2: `timestamp` '2025-13-45T25:61:00Z' is not a possible date and time."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": {"not": "a string"}}]}}), "Line 2: a text block's `text` must be a string."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": 42}]}}), "Line 2: a text block's `text` must be a string."),
        (lines({"type": "session"}, {"type": "custom_message", "customType": "x", "content": 7}), "Line 2: `content` must be a string or a list of blocks."),
        (b'{"type": "session"}\n' + b'{"type": "message", "message": {"role": "user", "content": "x", "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "Line 2: nested too deeply."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": "x", "deep": json.loads("[" * 80 + "]" * 80)}}), "Line 2: nested more than 64 levels deep."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": "a\x00b"}}), "Line 2: contains a NUL character (U+0000), which cannot be stored."),
        (lines({"type": "session"}, {"type": "custom_message", "customType": {"a": 1}, "content": "x"}), "Line 2: `customType` must be a string."),
        (lines({"type": "session"}, {"type": "custom", "customType": "c" * 101}), "Line 2: `customType` is longer than 100 characters."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "r" * 41, "content": "x"}}), "Line 2: a message's `role` is longer than 40 characters."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "assistant", "model": "m" * 101, "content": "x"}}), "Line 2: a message's `model` is longer than 100 characters."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": "x", "meta": {"key\x00": 1}}}), "Line 2: contains a NUL character (U+0000), which cannot be stored."),
        (b'{"type": "session"}\n{"type": "message", "message": {"role": "user", "content": "half \\ud800 a pair"}}', "Line 2: contains half of a surrogate pair (not text), which cannot be stored."),
        (lines({"type": "session"}, {"type": "message", "message": {"role": "user", "content": "a\x00b", "deep": json.loads("[" * 80 + "]" * 80)}}), "Line 2: nested more than 64 levels deep."),
    ],
)  # fmt: skip
def test_an_invalid_file_is_refused_with_its_line_and_leaves_nothing(signed_in, owner, data, error):
    response = upload(signed_in, "bad.jsonl", data)
    assert error in html.unescape(response.content.decode())
    assert ChatSession.objects.count() == 0
    assert Entry.objects.count() == 0


def test_a_twenty_megabyte_file_is_refused_before_it_is_read(signed_in, owner):
    big = b'{"type":"session"}\n' + b" " * (20 * 1024 * 1024)
    response = upload(signed_in, "big.jsonl", big)
    assert "File too large: 20.0 MB (the limit is 16 MB)" in response.content.decode()
    assert ChatSession.objects.count() == 0


def test_an_imported_session_can_be_handed_off(owner):
    data = lines(
        {"type": "session", "version": 3},
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "message": {"role": "user", "content": "q"},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "message": {"role": "assistant", "content": "a"},
        },
    )
    session = session_file.import_jsonl(owner, data.decode().splitlines())
    handoff.check_guard(store.count_messages(store.get_branch(session)))


def test_reading_stops_at_the_size_limit():
    with pytest.raises(session_file.InvalidSessionFile):
        session_file.read_lines(io.BytesIO(b"x"), reading.MAX_IMPORT_BYTES + 1)


def test_a_file_with_more_entries_than_the_limit_is_refused(signed_in, owner, settings):
    settings.AGENTWEB_MAX_IMPORT_ENTRIES = 10
    data = lines({"type": "session"}, *({"type": "message", "message": {"role": "user", "content": f"m{i}"}} for i in range(11)))  # fmt: skip
    response = upload(signed_in, "long.jsonl", data)
    assert "The file has 11 entries (the limit is 10)." in html.unescape(response.content.decode())
    assert ChatSession.objects.count() == 0


class CountingDict(dict):
    lookups = 0

    def __getitem__(self, key):
        CountingDict.lookups += 1
        return super().__getitem__(key)


def test_the_cycle_check_looks_each_parent_up_once_however_long_the_chain():
    keys = [f"{i:08x}" for i in range(5_000)]
    parent_of = CountingDict({key: keys[i - 1] if i else None for i, key in enumerate(keys)})
    CountingDict.lookups = 0
    reading._check_acyclic(parent_of, {key: i + 2 for i, key in enumerate(keys)})
    assert CountingDict.lookups <= len(keys)  # the walk from each entry stops at known ground


def test_a_long_chain_with_a_loop_at_its_end_names_the_line_of_the_loop(owner):
    chain = [{"type": "message", "id": f"{i:06x}", "parentId": f"{i - 1:06x}" if i else None, "message": {"role": "user", "content": "x"}} for i in range(3_000)]  # fmt: skip
    chain += [
        {
            "type": "message",
            "id": "aa",
            "parentId": "bb",
            "message": {"role": "user", "content": "y"},
        },
        {
            "type": "message",
            "id": "bb",
            "parentId": "aa",
            "message": {"role": "user", "content": "z"},
        },
    ]
    with pytest.raises(session_file.InvalidSessionFile, match="parentId forms a cycle"):
        session_file.import_jsonl(
            owner, lines({"type": "session", "version": 3}, *chain).decode().split("\n")
        )


def test_line_separators_inside_text_survive_export_and_import(signed_in, owner):
    text = "one\u2028two\u2029three\u0085four\r\nfive"
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": text}])
    exported = b"".join(chunk.encode() for chunk in session_file.export_jsonl(session))
    assert "\u2028".encode() not in exported and b"\\u2028" in exported
    assert exported.count(b"\n") == 2  # the header and one entry: one line each
    response = upload(signed_in, "seps.jsonl", exported)
    assert response.status_code == 200
    imported = ChatSession.objects.exclude(pk=session.pk).get()
    assert store.get_branch(imported)[0].text == text
