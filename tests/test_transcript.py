"""How the page shows tool work, thinking, bash executions and compactions: compactly, folded."""

from __future__ import annotations

import html
import re

import pytest

from sessions import session_file, store, transcript
from sessions.models import ChatSession, Entry

from .test_context import version_3

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(client, owner):
    client.force_login(owner)
    session = session_file.import_jsonl(owner, version_3())
    return html.unescape(client.get(session.get_absolute_url()).content.decode())


def test_a_tool_call_is_one_line_with_its_result_folded_under_it_and_errors_marked(page):
    tool = re.search(
        r'<details id="tool-\d+-\d+" class="tool tool--error">(.*?)</details>', page, re.DOTALL
    )
    assert tool, page
    assert '<code class="tool-line">bash(command="npm test", timeout=60)</code>' in tool.group(1)
    assert '<span class="badge badge--error">error</span>' in tool.group(1)
    assert '<pre class="tool-result">1 failed</pre>' in tool.group(1)
    assert page.count("1 failed") == 1  # the result's own entry is not shown again


def test_thinking_is_folded_and_images_are_a_placeholder(page):
    assert (
        '<details class="thinking"><summary>Thinking</summary><div class="plain">Run them first.'
        in page
    )
    assert '<p class="image-placeholder">[image: image/png]</p>' in page
    assert "iVBORw0K" not in page


def test_a_compaction_is_a_marker_whose_summary_opens(page):
    marker = re.search(
        r'<details class="marker marker--compaction"><summary>(.*?)</summary>(.*?)</details>',
        page,
        re.DOTALL,
    )
    assert marker and marker.group(1) == "Context compacted · 5,000 tokens before"
    assert "OLD SUMMARY" in marker.group(2)
    assert "Context compacted · 9,000 tokens before" in page


def test_a_bash_execution_shows_its_command_and_marks_a_failing_exit(page):
    bash = re.search(r'<details class="tool tool--error"><summary><code class="tool-line">\$ git diff</code>(.*?)</details>', page, re.DOTALL)  # fmt: skip
    assert bash and '<span class="badge badge--error">exit 1</span>' in bash.group(1)


def test_model_changes_and_branch_summaries_are_markers(page):
    assert "Model changed to <code>claude-opus-4-1</code> (anthropic)" in page
    assert "<summary>Summary of an abandoned branch</summary>" in page


def test_a_window_of_the_transcript_never_starts_with_a_tool_result(owner):
    session = ChatSession.objects.create(owner=owner, model="local")
    for n in range(5):
        session.append_message(
            "assistant",
            [{"type": "toolCall", "id": f"t{n}", "name": "read", "arguments": {"path": "a.py"}}],
        )
        session.append_message(
            "toolResult",
            [{"type": "text", "text": f"result {n}"}],
            data={"message": {"toolCallId": f"t{n}", "toolName": "read"}},
        )
    branch = store.get_branch(session)
    assert transcript.start_of_window([e.role for e in branch], 3) == 2
    shown = transcript.window(store.branch_outline(session))["entries"]
    assert [e.role for e in shown] == ["assistant"] * 5
    assert transcript.blocks(shown[-1])[0]["result"] == "result 4"


def test_a_tool_result_whose_call_is_not_on_the_page_is_shown_on_its_own(owner):
    session = ChatSession.objects.create(owner=owner, model="local")
    session.append_message(
        "toolResult",
        [{"type": "text", "text": "orphan output"}],
        data={"message": {"toolCallId": "gone", "toolName": "grep", "isError": True}},
    )
    [entry] = transcript.fold(store.get_branch(session))
    assert entry.role == Entry.Role.TOOL_RESULT
    block = transcript.blocks(entry)[0]
    assert (block["line"], block["result"], block["error"]) == (
        "grep result",
        "orphan output",
        True,
    )
