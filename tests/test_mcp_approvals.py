"""The user decides (issue 53): a tool call that changes things waits for Allow once, Allow for
this session or Deny, from any tab of the session; the clock and Cancel deny it. The tool is
the tests' own MCP server's `write` (tests/mcp_servers/workshop.py), over stdio; the model is
the fake Anthropic server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sessions import generation, session_file
from sessions.mcp import hub
from sessions.models import Entry, ToolQuestion

from .conftest import db_async, make_session
from .fake_anthropic import FakeAnthropic, Reply
from .mcp_servers import servers_file, workshop_spec
from .servers import Daphne, RedisServer
from .test_processes import model_env

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

ASKED = "Run <code>mcp__workshop__write</code>?"


@pytest_asyncio.fixture
async def workshop_server(settings: Any, tmp_path: Path) -> AsyncIterator[Path]:
    """The tests' own server, configured; yields the folder where it notes what it wrote."""
    notes = tmp_path / "notes"
    notes.mkdir()
    settings.AGENTWEB_MCP_SERVERS = servers_file(tmp_path, workshop=workshop_spec(notes))
    yield notes
    await hub.close()


def question_in(html: str) -> int:
    """The question the latest card with buttons in `html` asks."""
    found = re.findall(r'"action": "answer", "question": (\d+)', html)
    assert found, "no question card in the frames"
    return int(found[-1])


def results_sent(fake_anthropic: Any) -> list[dict[str, Any]]:
    return [r["json"]["messages"][-1]["content"][0] for r in fake_anthropic.requests[1:]]


def written(notes: Path) -> list[str]:
    return (notes / "written").read_text().splitlines() if (notes / "written").exists() else []


async def test_allow_once_runs_the_call_and_the_reply_goes_on(
    owner, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "notes.txt"}, text="Writing it."),
        Reply.text("Written."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write notes.txt")
    html = await tab.until(ASKED)
    assert "A tool of the MCP server <strong>workshop</strong> that may change things." in html
    assert (
        '<pre class="question-arguments"><code>{\n  &quot;name&quot;: &quot;notes.txt&quot;\n}</code></pre>'
        in html
    )
    for button in ("Allow once", "Allow for this session", "Deny"):
        assert f">{button}</button>" in html
    assert written(workshop_server) == []  # nothing runs before the answer

    await tab.send(action="answer", question=question_in(html), answer="once")
    html = await tab.until("Written.</p>")
    await generation.wait_idle()
    assert '<p class="question-answer" role="status">Allowed once</p>' in "".join(tab.received)
    assert written(workshop_server) == ["notes.txt"]
    assert results_sent(fake_anthropic)[0]["content"] == "wrote notes.txt"
    stored = await db_async(lambda: list(ToolQuestion.objects.values_list("answer", flat=True)))()
    assert stored == ["once"]


async def test_allow_for_this_session_answers_the_tools_later_calls(
    owner, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "one.txt"}),
        Reply.tool("mcp__workshop__write", {"name": "two.txt"}),
        Reply.text("Both written."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write two files")
    html = await tab.until(ASKED)
    await tab.send(action="answer", question=question_in(html), answer="session")
    await tab.until("Both written.</p>")
    await generation.wait_idle()
    assert written(workshop_server) == ["one.txt", "two.txt"]
    assert await db_async(ToolQuestion.objects.count)() == 1  # the second was not asked


async def test_deny_runs_nothing_and_the_model_reads_that_the_user_denied_it(
    owner, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "secret.txt"}), Reply.text("Understood.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write secret.txt")
    html = await tab.until(ASKED)
    await tab.send(action="answer", question=question_in(html), answer="deny")
    await tab.until("Understood.</p>")
    await generation.wait_idle()
    assert written(workshop_server) == []
    result = results_sent(fake_anthropic)[0]
    assert (result["content"], result["is_error"]) == (
        "The user denied this call: it was not run.", True,
    )  # fmt: skip


async def test_a_second_tab_and_a_reloaded_page_show_the_question_and_answer_it(
    owner, fake_anthropic, open_tab, workshop_server, client
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "shared.txt"}), Reply.text("Done there.")
    )
    _, first = await open_tab(owner, session)
    await first.send(message="Write shared.txt")
    question = question_in(await first.until(ASKED))

    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(f"/sessions/{session.pk}/")).content.decode()
    assert f'id="question-{question}"' in page and ">Allow once</button>" in page

    _, second = await open_tab(owner, session)  # a tab opened now catches up with it
    assert ASKED in await second.until(ASKED)
    await second.send(action="answer", question=question, answer="once")
    await first.until("Done there.</p>")
    await generation.wait_idle()
    assert written(workshop_server) == ["shared.txt"]
    await second.send(action="answer", question=question, answer="deny")  # too late
    assert "That question was answered already" in await second.until("answered already")


async def test_cancel_while_a_question_waits_denies_it_and_ends_the_reply(
    owner, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "never.txt"}), Reply.text("Never said.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write never.txt")
    await tab.until(ASKED)
    await tab.send(action="cancel")
    await tab.until("Denied: the reply was cancelled")
    await generation.wait_idle()
    assert written(workshop_server) == []
    assert len(fake_anthropic.requests) == 1  # the reply ended there
    stored = await db_async(lambda: [e.text for e in Entry.objects.filter(role="toolResult")])()
    assert stored == ["The user cancelled the reply while this call waited: not run."]


async def test_a_question_left_unanswered_is_denied_as_timed_out(
    owner, fake_anthropic, open_tab, workshop_server, settings
):
    settings.AGENTWEB_MCP_APPROVAL_SECONDS = 0.5
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "late.txt"}), Reply.text("No answer came.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write late.txt")
    await tab.until("No answer came.</p>")
    await generation.wait_idle()
    assert "Denied: no answer in time" in "".join(tab.received)
    assert results_sent(fake_anthropic)[0]["content"] == (
        "Not run: the user did not answer within 0.5 s, so the call was denied."
    )
    assert written(workshop_server) == []


async def test_only_a_tab_of_the_questions_own_session_can_answer_it(
    owner, other_user, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    elsewhere = await db_async(make_session)(owner)
    theirs = await db_async(make_session)(other_user)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "mine.txt"}), Reply.text("Mine.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write mine.txt")
    question = question_in(await tab.until(ASKED))

    _, other_session_tab = await open_tab(owner, elsewhere)
    await other_session_tab.send(action="answer", question=question, answer="once")
    assert "answered already, or is not this session" in await other_session_tab.until(
        "answered already"
    )
    _, intruder = await open_tab(other_user, theirs)
    await intruder.send(action="answer", question=question, answer="once")
    await intruder.until("answered already, or is not this session")
    await tab.send(action="answer", question=question, answer="wave")
    assert "Select a valid choice." in await tab.until("valid choice")
    assert written(workshop_server) == []

    await tab.send(action="answer", question=question, answer="deny")
    await tab.until("Mine.</p>")
    await generation.wait_idle()


async def test_the_tool_work_and_its_outcomes_round_trip_through_export_and_import(
    owner, fake_anthropic, open_tab, workshop_server
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "kept.txt"}),
        Reply.tool("mcp__workshop__write", {"name": "refused.txt"}),
        Reply.text("One of two."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write both")
    await tab.send(action="answer", question=question_in(await tab.until(ASKED)), answer="once")
    await tab.until("wrote kept.txt")
    tab.received.clear()
    await tab.send(action="answer", question=question_in(await tab.until(ASKED)), answer="deny")
    await tab.until("One of two.</p>")
    await generation.wait_idle()

    def exported(chat: Any) -> list[dict[str, Any]]:
        return [json.loads(line) for line in session_file.export_jsonl(chat)]

    lines = await db_async(exported)(session)
    messages = [line["message"] for line in lines if line.get("type") == "message"]
    calls = [b for m in messages if m["role"] == "assistant" for b in m["content"]]
    assert [(b["name"], b["arguments"]) for b in calls if b["type"] == "toolCall"] == [
        ("mcp__workshop__write", {"name": "kept.txt"}),
        ("mcp__workshop__write", {"name": "refused.txt"}),
    ]
    results = [
        (m["toolName"], m["isError"], m["content"][0]["text"])
        for m in messages
        if m["role"] == "toolResult"
    ]  # noqa: E501
    assert results == [
        ("mcp__workshop__write", False, "wrote kept.txt"),
        ("mcp__workshop__write", True, "The user denied this call: it was not run."),
    ]
    text = [json.dumps(line) for line in lines]
    copy = await db_async(session_file.import_jsonl)(owner, text)
    again = [
        line["message"] for line in await db_async(exported)(copy) if line.get("type") == "message"
    ]  # noqa: E501
    assert again == messages


# --- across two processes --------------------------------------------------------------------
@pytest.fixture
def pair_with_tools(
    django_db_setup: Any, fake_server: FakeAnthropic, redis: RedisServer, tmp_path: Path
) -> Iterator[tuple[Daphne, Daphne, Path]]:
    """Two daphnes sharing Redis and the database, both configured with the workshop server;
    yields them and the folder where the workshop notes what it wrote."""
    notes = tmp_path / "notes"
    notes.mkdir()
    configured = servers_file(tmp_path, workshop=workshop_spec(notes))
    env = {**model_env(fake_server, redis), "AGENTWEB_MCP_SERVERS": configured}
    a, b = Daphne("daphne-tools-a", **env), Daphne("daphne-tools-b", **env)
    yield a, b, notes
    a.stop()
    b.stop()


async def test_a_question_asked_in_one_process_is_answered_from_a_tab_on_the_other(
    owner, fake_anthropic, pair_with_tools, open_socket
):
    a, b, notes = pair_with_tools
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "far.txt"}), Reply.text("Written from afar.")
    )
    tab_a = await open_socket(a, owner, session)
    tab_b = await open_socket(b, owner, session)
    await tab_a.send(message="Write far.txt")  # the generation runs in process a
    question = question_in(await tab_b.until(ASKED))  # process b's tab is asked too
    await tab_b.send(action="answer", question=question, answer="once")
    await tab_a.until("Written from afar.</p>")
    await tab_b.until("Allowed once")
    assert written(notes) == ["far.txt"]


# --- mcp-server-git, from PyPI, on a repository of the test's own --------------------------------
@pytest_asyncio.fixture
async def git_repository(settings: Any, tmp_path: Path) -> AsyncIterator[Path]:
    """A repository with one commit and two new files, and mcp-server-git configured on it."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
        return done.stdout

    git("init", "-q")
    git("config", "user.email", "agent@example.com")
    git("config", "user.name", "Agent")
    (repo / "README").write_text("hello\n")
    git("add", "README")
    git("commit", "-qm", "First commit")
    (repo / "parser.py").write_text("def parse(): ...\n")
    (repo / "secrets.env").write_text("TOKEN=abc\n")
    server = {
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repo)],
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"git": server}}))
    settings.AGENTWEB_MCP_SERVERS = str(tmp_path / "mcp.json")
    yield repo
    await hub.close()


async def test_claude_reads_the_status_the_user_allows_one_commit_and_denies_another(
    owner, fake_anthropic, open_tab, git_repository
):
    repo = str(git_repository)
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__git__git_status", {"repo_path": repo}),
        Reply.tool("mcp__git__git_add", {"repo_path": repo, "files": ["parser.py"]}),
        Reply.tool("mcp__git__git_commit", {"repo_path": repo, "message": "Add the parser"}),
        Reply.tool("mcp__git__git_add", {"repo_path": repo, "files": ["secrets.env"]}),
        Reply.text("The parser is committed; the secrets were not added."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Commit the parser")
    html = await tab.until("Run <code>mcp__git__git_add</code>?")  # the status ran at once
    await tab.send(action="answer", question=question_in(html), answer="once")
    tab.received.clear()
    html = await tab.until("Run <code>mcp__git__git_commit</code>?")
    await tab.send(action="answer", question=question_in(html), answer="once")
    tab.received.clear()
    html = await tab.until("Run <code>mcp__git__git_add</code>?")
    await tab.send(action="answer", question=question_in(html), answer="deny")
    await tab.until("the secrets were not added.</p>")
    await generation.wait_idle()

    status, added, committed, denied = results_sent(fake_anthropic)
    assert "Untracked files:" in status["content"] and "parser.py" in status["content"]
    assert added["content"] == "Files staged successfully"
    assert committed["content"].startswith("Changes committed successfully with hash ")
    assert denied["content"] == "The user denied this call: it was not run."
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert log.splitlines() == ["Add the parser", "First commit"]
    untracked = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert untracked == "?? secrets.env\n"


@pytest.mark.django_db(transaction=True)
async def test_the_open_question_of_a_generation_whose_job_died_is_closed_as_interrupted(owner):
    from django.utils import timezone

    from sessions.generation import claims

    def asked_then_died() -> ToolQuestion:
        session = make_session(owner, exchanges=1)
        session.__class__.objects.filter(pk=session.pk).update(
            generation_id="g-dead", generation_lease_until=timezone.now()
        )
        asked = ToolQuestion.objects.create(
            session=session, generation_id="g-dead", call_id="c1", tool="mcp__git__git_commit",
            server="git", arguments={"message": "x"},
        )  # fmt: skip
        assert claims.take_back(session.pk, "g-dead")
        asked.refresh_from_db()
        return asked

    asked = await db_async(asked_then_died)()
    assert (asked.answer, asked.said) == ("interrupted", "Not run: the reply was interrupted")
    assert asked.answered_at is not None
