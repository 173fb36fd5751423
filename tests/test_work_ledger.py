"""The work ledger (issue 54, item 1): what the session's tool work did, written by code from
its tool calls, in the handoff request and at the end of the document."""

from __future__ import annotations

import pytest

from sessions import generation, handoff, ledger, store
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, redirected_session

PIPED_BUILD = (
    "> gateway@2.3.1 build\n> tsc -p tsconfig.json\n\n"
    "src/theme/index.ts(3,10): error TS2305: Module '\"./palette\"' has no exported member "
    "'nord'.\n\nFound 1 error in src/theme/index.ts:3"
)


def worked(session: ChatSession, *calls: tuple[str, dict, str, bool]) -> None:
    """The assistant's tool calls (name, arguments), each with its result (text, is an error)."""
    for n, (name, arguments, result, error) in enumerate(calls):
        call = {"type": "toolCall", "id": f"call_{n}", "name": name, "arguments": arguments}
        session.append_message("assistant", [call])
        session.append(
            kind=Entry.Kind.MESSAGE,
            role=Entry.Role.TOOL_RESULT,
            content=[{"type": "text", "text": result}],
            data={"message": {"toolCallId": f"call_{n}", "toolName": name, "isError": error}},
        )


def section_of(session: ChatSession) -> str:
    return ledger.section(ledger.ledger_of(store.get_branch(session)))


@pytest.mark.django_db
def test_a_build_whose_pipe_hid_its_exit_code_is_reported_failed_with_its_error_code(owner):
    session = make_session(owner, exchanges=1)
    worked(session, ("bash", {"command": "npm run build 2>&1 | tee build.log"}, PIPED_BUILD, False))
    text = section_of(session)
    assert (
        "- `npm run build 2>&1 | tee build.log`: FAILED (failure in its output): "
        "src/theme/index.ts(3,10): error TS2305: Module '\"./palette\"' has no exported member "
        "'nord'."
    ) in text
    assert "Last failure, word for word, of `npm run build 2>&1 | tee build.log`:" in text
    assert "succeeded" not in text


@pytest.mark.django_db
def test_a_file_deleted_or_renamed_later_is_listed_as_gone_never_as_current(owner):
    session = make_session(owner, exchanges=1)
    worked(
        session,
        ("write", {"path": "src/main-new.ts", "content": "x"}, "Wrote 1 line", False),
        ("write", {"path": "themes/nord.json", "content": "{}"}, "Wrote 1 line", False),
        ("edit", {"path": "docs/refactor.md", "oldText": "a", "newText": "b"}, "Edited", False),
        ("bash", {"command": "rm src/main-new.ts && git mv docs/refactor.md docs/plan.md"}, "", False),
        ("mcp__fs__move_file", {"source": "themes/nord.json", "destination": "themes/polar.json"}, "Moved", False),
    )  # fmt: skip
    text = section_of(session)
    assert "- `src/main-new.ts`: deleted (no longer there)" in text
    assert "- `docs/refactor.md`: renamed to `docs/plan.md` (no longer there)" in text
    assert "- `themes/nord.json`: renamed to `themes/polar.json` (no longer there)" in text
    assert "- `themes/polar.json`: created" in text
    assert "- `docs/plan.md`: edited" in text


@pytest.mark.django_db
def test_a_change_is_verified_only_by_a_later_read_test_or_command(owner):
    session = make_session(owner, exchanges=1)
    worked(
        session,
        ("edit", {"path": "src/a.ts", "oldText": "1", "newText": "2"}, "Edited", False),
        ("bash", {"command": "npm test"}, "Tests: 12 passed, 12 total", False),
        ("edit", {"path": "src/b.ts", "oldText": "1", "newText": "2"}, "Edited", False),
        ("edit", {"path": "src/c.ts", "oldText": "1", "newText": "2"}, "No match found", True),
    )
    text = section_of(session)
    assert "- `src/a.ts`: edited (verified)" in text
    assert "- `src/b.ts`: edited (attempted)" in text
    assert "src/c.ts" not in text  # the edit that failed changed nothing
    assert "- `npm test`: passed (12 passed)" in text


@pytest.mark.django_db
def test_a_failure_fixed_later_says_so_and_each_command_is_listed_once(owner):
    session = make_session(owner, exchanges=1)
    worked(
        session,
        ("bash", {"command": "pytest -q"}, "FAILED tests/test_a.py::test_x\n1 failed, 9 passed", True),
        ("bash", {"command": "pytest -q"}, "10 passed in 0.4s", False),
        ("bash", {"command": "ls -la"}, "total 0", False),
    )  # fmt: skip
    text = section_of(session)
    assert "- `pytest -q`: passed (10 passed); 1 of 2 runs failed" in text
    assert "Last failure (since fixed), word for word, of `pytest -q`:" in text
    assert "> FAILED tests/test_a.py::test_x" in text
    assert "ls -la" not in text  # a look around that succeeded is no work done


@pytest.mark.django_db
def test_commits_pushes_and_tags_from_the_shell_and_the_git_server(owner):
    session = make_session(owner, exchanges=1)
    worked(
        session,
        ("bash", {"command": 'git commit -am "Theme system, first cut"'}, "[main 1a2b3c4] Theme", False),
        ("mcp__git__git_commit", {"repo_path": "/srv/repo", "message": "Nord palette"}, "Committed", False),
        ("bash", {"command": "git push origin main && git tag v1.4.0"}, "rejected", True),
    )  # fmt: skip
    text = section_of(session)
    assert '- commit "Theme system, first cut" (verified)' in text
    assert '- commit "Nord palette" (verified)' in text
    assert "- push origin main (attempted: it failed)" in text
    assert "- tag v1.4.0 (attempted: it failed)" in text


@pytest.mark.django_db
def test_the_ledger_keeps_within_its_budget_newest_first(owner):
    session = make_session(owner, exchanges=1)
    worked(
        session,
        *[("read", {"path": f"src/file_{n:03}.ts"}, "x", False) for n in range(200)],
    )
    text = ledger.section(ledger.ledger_of(store.get_branch(session)), budget=300)
    assert "- `src/file_199.ts`: read" in text and "src/file_000.ts" not in text
    assert "more left out" in text


@pytest.mark.django_db
def test_a_session_with_no_tool_work_has_no_ledger(owner):
    assert section_of(make_session(owner, exchanges=3)) == ""


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_handoff_request_carries_the_ledger_and_the_document_ends_with_it(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    old = await db_async(make_session)(owner, exchanges=1)
    await db_async(worked)(
        old, ("bash", {"command": "npm run build | tee log"}, PIPED_BUILD, False)
    )
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    asked = fake_anthropic.requests[0]["json"]["messages"][-1]["content"][-1]["text"]
    assert "<ledger>\n## Work ledger" in asked
    assert "error TS2305" in asked.split("<ledger>", 1)[1]
    [seed] = await db_async(lambda: list(Entry.objects.filter(session_id=new_id)))()
    document = handoff.unwrap(seed.text)
    assert document.startswith(DOCUMENT)
    assert "## Work ledger" in document.split(DOCUMENT, 1)[1]
    assert "- `npm run build | tee log`: FAILED (failure in its output)" in document
