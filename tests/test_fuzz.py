"""Fuzzing with hypothesis: no input makes the command parser, the frame parser, markdown
rendering or the JSONL importer raise anything unhandled, or render HTML nh3 would change.

CI runs the default profile; `make fuzz` runs many more examples (HYPOTHESIS_PROFILE=long).
"""

from __future__ import annotations

import json
import os

import nh3
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions import commands, session_file, store, todos
from sessions.forms import Frame, FrameError, parse_frame
from sessions.rendering import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, render_markdown

from .xss import PAYLOADS, dangerous

settings.register_profile("default", max_examples=150, deadline=None)
settings.register_profile("long", max_examples=5_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

DB = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Text with what databases refuse (NUL, half surrogate pairs) as well as ordinary characters.
any_text = st.text(max_size=40) | st.text(
    alphabet=st.sampled_from(["\x00", "\ud800", "\udfff", "a", "中", "😀", "\u2028"]), max_size=6
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# Integers beyond what a database column keeps, timestamps beyond what UTC can name.
huge_integers = st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([2**31, 2**63])
timestamps = (
    st.text(max_size=30)
    | st.datetimes().map(lambda d: d.isoformat())
    | st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
)
usages = json_values | st.dictionaries(
    st.sampled_from(["input", "output", "cacheRead", "cacheWrite", "totalTokens"]),
    huge_integers | json_values,
    max_size=5,
)
# Every field agentweb reads inside `data` or `details`, given any JSON (issue 18 items 2-4).
nested_fields = json_values | st.dictionaries(
    st.sampled_from(
        ["todos", "source", "text", "warnings", "fitted", "coverage", "context_tokens_before"]
        + ["refs", "purpose", "handoff"]
    ),
    json_values | st.lists(json_values, max_size=3),
    max_size=4,
)
markdownish = st.text(
    alphabet=st.sampled_from(list("#*_`[]()<>!-|:/\\\"' \n\tajsxc=&;0123456789é中😀")), max_size=300
) | st.sampled_from(PAYLOADS)


@given(
    st.text(max_size=200) | st.sampled_from(["/handoff", "/help", "/x y", "/", "//", "/etc/passwd"])
)
def test_the_command_parser_takes_any_text(text):
    parsed = commands.parse(text, template_names=frozenset({"review"}))
    assert isinstance(parsed, commands.Prompt | commands.CommandCall | commands.UnknownCommand)
    if isinstance(parsed, commands.CommandCall):
        assert parsed.name in commands.REGISTRY


frame_fields = st.dictionaries(
    st.sampled_from(["action", "message", "document", "entry", "HEADERS", "other"]),
    json_values,
    max_size=5,
)


@given(st.one_of(st.text(max_size=300), frame_fields.map(json.dumps), json_values.map(json.dumps)))
def test_the_frame_parser_takes_any_frame(text):
    try:
        frame = parse_frame(text)
    except FrameError as error:
        assert error.reason
    else:
        assert isinstance(frame, Frame)
        assert frame.action in ("send", "cancel", "handoff_confirm", "handoff_discard")
        for field in (frame.message, frame.document):  # storable in any database
            assert "\x00" not in field
            field.encode("utf-8")  # raises on a lone surrogate


@given(markdownish)
def test_markdown_renders_to_html_the_sanitiser_would_leave_alone(text):
    html = render_markdown(text)
    again = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    assert again == html
    assert dangerous(html) == []


entry_lines = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "message",
                "custom_message",
                "compaction",
                "model_change",
                "label",
                "branch_summary",
                "custom",
                "thinking_level_change",
                "teleport",
            ]
        )
    },  # fmt: skip
    optional={
        "id": st.text(max_size=4) | st.integers(),
        "parentId": st.none() | st.text(max_size=4),
        "timestamp": timestamps,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "role": st.sampled_from(["user", "assistant", "toolResult", "bashExecution"])
                | json_values,
                "content": st.text(max_size=50)
                | st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["text", "thinking", "toolCall", "image"])},
                        optional={
                            "text": json_values,
                            "thinking": json_values,
                            "name": json_values,
                            "arguments": json_values,
                            "mimeType": json_values,
                        },
                    ),
                    max_size=3,
                ),  # fmt: skip
                "usage": usages,
                "stopReason": json_values,
                "toolName": st.sampled_from(["todo_write", "bash"]) | json_values,
                "toolCallId": json_values,
                "isError": json_values,
                "details": nested_fields,
                "command": json_values,
                "output": json_values,
                "exitCode": json_values,
            },
        ),
        "summary": json_values,
        "firstKeptEntryId": json_values,
        "firstKeptEntryIndex": json_values,
        "customType": st.sampled_from(["todos", "handoff", "note"]) | json_values,
        "content": json_values,
        "data": nested_fields,
        "details": nested_fields,
        "display": json_values,
        "thinkingLevel": st.sampled_from(["off", "high"]) | json_values,
        "tokensBefore": huge_integers | json_values,
        "modelId": json_values,
        "label": json_values,
    },
)


@pytest.mark.django_db
@DB
@given(st.lists(entry_lines, max_size=8), st.sampled_from([None, 1, 2, 3]))
def test_the_importer_takes_any_file_and_what_it_takes_renders_and_exports(owner, lines, version):
    header = {"type": "session", "id": "s"} | ({"version": version} if version else {})
    raw = [json.dumps(header), *(json.dumps(line) for line in lines)]
    try:
        session = session_file.import_jsonl(owner, raw)
    except session_file.InvalidSessionFile as error:
        assert str(error).startswith(("Line ", "The file"))
        return
    client = Client()
    client.force_login(owner)
    assert client.get(session.get_absolute_url()).status_code == 200
    assert client.get(f"/sessions/{session.pk}/tree/").status_code == 200
    assert b"".join(client.get(f"/sessions/{session.pk}/export.jsonl")).strip()
    assert session_file.export_markdown(session)
    store.session_context(session)
    todos.state(session)
    if session.leaf_id:
        forked = session.fork(session.leaf_id)
        assert client.get(forked.get_absolute_url()).status_code == 200
        assert b"".join(client.get(f"/sessions/{forked.pk}/export.jsonl")).strip()
