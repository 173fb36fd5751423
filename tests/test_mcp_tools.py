"""The agent acts through MCP tools (issue 53): the operator's file of servers, their tools
offered to Claude as `mcp__<server>__<tool>`, read-only tools run at once, and every way a
call can go wrong an error result the model reads. Real servers: `mcp-server-time` from PyPI
and the tests' own (tests/mcp_servers/workshop.py), over stdio; the model is the fake
Anthropic server."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sessions import generation, handoff
from sessions.agent.recall_tool import look_up
from sessions.mcp import config, hub
from sessions.mcp.config import ServersFileError
from sessions.models import ChatSession, Entry, ToolChoice, ToolQuestion

from .conftest import db_async, make_session
from .fake_anthropic import COUNTED, Reply, tool_tokens
from .mcp_servers import servers_file, workshop_spec
from .mcp_servers.workshop import PNG
from .servers import ROOT, free_port, wait_for_port


@pytest_asyncio.fixture
async def servers(settings: Any, tmp_path: Path) -> AsyncIterator[Path]:
    """The operator's file naming `time` (mcp-server-time) and `workshop` (the tests' own),
    both over stdio; yields the folder where the workshop notes what happens to its calls."""
    notes = tmp_path / "notes"
    notes.mkdir()
    time = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    settings.AGENTWEB_MCP_SERVERS = servers_file(tmp_path, time=time, workshop=workshop_spec(notes))
    yield notes
    await hub.close()


async def noted(path: Path, seconds: float = 10) -> str:
    """What the workshop server wrote to `path`, once it has (a failure after `seconds`)."""
    async with asyncio.timeout(seconds):
        while not path.exists():
            await asyncio.sleep(0.05)
    return path.read_text()


def requests_tools(fake_anthropic: Any, number: int = 0) -> list[str]:
    return [tool["name"] for tool in fake_anthropic.requests[number]["json"].get("tools", [])]


def result_sent(fake_anthropic: Any, number: int = 1) -> dict[str, Any]:
    """The tool_result block request `number` sent back to the model."""
    return fake_anthropic.requests[number]["json"]["messages"][-1]["content"][0]


# --- the operator's file ---------------------------------------------------------------------
def test_the_file_names_stdio_and_http_servers_with_variables_from_the_environment(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "${REPO}"],
                            "env": {"TOKEN": "${TOKEN:-none}"}},
                    "docs": {"type": "http", "url": "https://mcp.example.com/mcp",
                             "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
                }
            }
        )
    )  # fmt: skip
    git, docs = config.load(str(path), {"REPO": "/srv/repo", "DOCS_TOKEN": "s3cret"})
    assert (git.transport, git.command, git.args) == (
        "stdio", "uvx", ("mcp-server-git", "--repository", "/srv/repo"),
    )  # fmt: skip
    assert git.env == {"TOKEN": "none"}
    assert (docs.transport, docs.url) == ("http", "https://mcp.example.com/mcp")
    assert docs.headers == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("{not json", "is not JSON"),
        ('{"servers": {}}', 'has no "mcpServers" object'),
        ('{"mcpServers": {"a__b": {"command": "x"}}}', "needs a name of letters"),
        ('{"mcpServers": {"git": {"command": "x", "args": "y"}}}', '"args" that is not a list'),
        ('{"mcpServers": {"git": {"type": "sse", "url": "http://x"}}}', "has type 'sse'"),
        ('{"mcpServers": {"docs": {"type": "http", "url": "ftp://x"}}}', 'needs a "url"'),
        ('{"mcpServers": {"git": {"command": "${NOT_SET_ANYWHERE}"}}}', "${NOT_SET_ANYWHERE}"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_file_and_the_fault(tmp_path, text, fault):
    path = tmp_path / "mcp.json"
    path.write_text(text)
    with pytest.raises(ServersFileError) as refused:
        config.load(str(path), {})
    assert str(path) in str(refused.value)
    assert fault in str(refused.value)


def test_a_missing_file_stops_start_up_with_its_name(tmp_path):
    missing = tmp_path / "nowhere.json"
    started = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "AGENTWEB_MCP_SERVERS": str(missing)},
    )  # fmt: skip
    assert started.returncode != 0
    assert f"AGENTWEB_MCP_SERVERS: cannot read {missing}: No such file or directory." in (
        started.stderr
    )


# --- tools offered and run ---------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_read_only_tool_is_offered_and_runs_at_once(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
        Reply.text("It is evening in Paris."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="What time is it in Paris?")
    await tab.until("It is evening in Paris.</p>")
    await generation.wait_idle()

    offered = requests_tools(fake_anthropic)
    assert "mcp__time__get_current_time" in offered and "mcp__time__convert_time" in offered
    assert "mcp__workshop__echo" in offered
    assert "mcp__workshop__write" in offered  # it changes things: offered, and asks first
    first = fake_anthropic.requests[0]["json"]["tools"]
    schema = next(t for t in first if t["name"] == "mcp__time__get_current_time")["input_schema"]
    assert schema["required"] == ["timezone"]
    result = result_sent(fake_anthropic)
    assert result.get("is_error") is None
    assert '"timezone": "Europe/Paris"' in result["content"]
    stored = await db_async(lambda: list(Entry.objects.filter(role="toolResult")))()
    assert stored[0].data["message"]["toolName"] == "mcp__time__get_current_time"
    assert await db_async(ToolQuestion.objects.count)() == 0  # read-only: nobody was asked


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_arguments_outside_the_schema_are_refused_before_the_call(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__echo", {"text": 42}), Reply.text("Let me fix that.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Echo")
    await tab.until("Let me fix that.</p>")
    await generation.wait_idle()
    result = result_sent(fake_anthropic)
    assert result["is_error"] is True
    assert result["content"] == (
        "Not called: the arguments do not match the tool's schema (text: 42 is not of type "
        "'string')."
    )
    assert not (servers / "calls").exists()  # the server never saw it


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tool_error_and_a_crash_are_results_the_model_reads_and_the_server_restarts(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__fail", {"why": "the disk is full"}),
        Reply.tool("mcp__workshop__crash", {}),
        Reply.tool("mcp__workshop__echo", {"text": "back", "times": 2}),
        Reply.text("All done."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Try them all")
    await tab.until("All done.</p>")
    await generation.wait_idle()
    failed, crashed, echoed = (result_sent(fake_anthropic, n) for n in (1, 2, 3))
    assert (failed["is_error"], failed["content"]) == (
        True,
        "Error executing tool fail: the disk is full",
    )
    assert crashed["is_error"] is True
    assert crashed["content"].startswith("The tool call failed: the MCP server 'workshop' ")
    assert (echoed["content"], echoed.get("is_error")) == ("back back", None)  # started again


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_long_result_is_clipped_for_the_model_kept_whole_and_recalled_after_a_handoff(
    owner, fake_anthropic, open_tab, servers, settings
):
    settings.AGENTWEB_MCP_RESULT_CHARS = 1_000
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__lines", {"count": 500}),
        Reply.text("Read."),
        Reply.text("Still here."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Read it")
    await tab.until("Read.</p>")
    await generation.wait_idle()
    whole = "\n".join(f"line {n:06d} of the long result" for n in range(1, 501))
    line = f"\n[… {len(whole) - 1000:,} more characters of this result left out (the session keeps them)]"  # noqa: E501
    assert result_sent(fake_anthropic)["content"] == whole[:1000] + line
    stored = await db_async(lambda: Entry.objects.get(role="toolResult").text)()
    assert stored == whole  # the session keeps it all

    await tab.send(message="And then?")  # the next request reads it as the first did
    await tab.until("Still here.</p>")
    await generation.wait_idle()
    assert (whole[:1000] + line) in json.dumps(
        fake_anthropic.requests[-1]["json"], ensure_ascii=False
    ).replace("\\n", "\n")  # noqa: E501

    def recalled_in_the_next_session() -> str:
        old = ChatSession.objects.get(pk=session.pk)
        reply = old.append_message(
            "assistant", [{"type": "text", "text": "## Goal\nGo on."}], data={"purpose": "handoff"}
        )
        new = handoff.new_session(old, from_entry=reply, content=handoff.wrap("## Goal\nGo on."), data={"warnings": []})  # fmt: skip  # noqa: E501
        return look_up({"query": "line 000480"}, new).text

    assert "line 000480 of the long result" in await db_async(recalled_in_the_next_session)()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_huge_result_is_kept_only_to_its_bound(
    owner, fake_anthropic, open_tab, servers, settings
):
    settings.AGENTWEB_MCP_KEPT_CHARS = 3_000
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__lines", {"count": 20_000}), Reply.text("Huge.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Read it all")
    await tab.until("Huge.</p>", timeout=20)
    await generation.wait_idle()
    stored = await db_async(lambda: Entry.objects.get(role="toolResult").text)()
    whole = len("\n".join(f"line {n:06d} of the long result" for n in range(1, 20_001)))
    assert stored.endswith(f"\n[… {whole - 3000:,} more characters the server sent were not kept]")
    assert len(stored) < 3_100


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_html_from_a_server_is_shown_as_text(owner, fake_anthropic, open_tab, servers):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.tool("mcp__workshop__page", {}), Reply.text("Fetched."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Fetch the page")
    html = await tab.until("Fetched.</p>")
    await generation.wait_idle()
    assert "<script>alert" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in html


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_call_past_the_timeout_fails_as_timed_out(
    owner, fake_anthropic, open_tab, servers, settings
):
    settings.AGENTWEB_MCP_TIMEOUT = 0.5
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.tool("mcp__workshop__slow", {"seconds": 30}), Reply.text("Late."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Wait")
    await tab.until("Late.</p>", timeout=20)
    await generation.wait_idle()
    result = result_sent(fake_anthropic)
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_fake_0",
        "content": "The tool call failed: the call timed out after 0.5 s",
        "is_error": True,
    }


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancel_during_a_call_ends_the_reply_and_the_server_is_told(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.tool("mcp__workshop__slow", {"seconds": 60}), Reply.text("Never."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Wait a minute")
    await noted(servers / "calls")  # the server has the call
    await tab.send(action="cancel")
    await tab.until_idle(timeout=10)
    await generation.wait_idle()
    # the SDK's notifications/cancelled reaches the server
    assert await noted(servers / "cancelled", seconds=5) == "slow\n"
    assert len(fake_anthropic.requests) == 1  # the reply ended: the model was not asked again
    stored = await db_async(lambda: [e.content for e in Entry.objects.filter(role="toolResult")])()
    assert stored == [
        [
            {
                "type": "text",
                "text": "The user cancelled this call: it was stopped before it returned.",
            }
        ]
    ]  # noqa: E501


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_offline_model_is_offered_no_mcp_tools(owner, open_tab, servers):
    from sessions.agent.provider import provider_for
    from sessions.agent.tools import offered_tools

    assert provider_for("local").calls_mcp_tools is False
    assert provider_for("claude-fake-test").calls_mcp_tools is True
    session = await db_async(make_session)(owner, model="local")
    assert all(not t.name.startswith("mcp__") for t in await db_async(offered_tools)(session))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Use the git tool to read the repository's status")
    said = await tab.until("they need Claude")
    assert "I cannot call tools: the MCP tools this server offers act on real things" in said
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_calls_progress_shows_in_its_line_while_it_runs(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.tool("mcp__workshop__steps", {"count": 3}), Reply.text("Done."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Work in steps")
    shown = await tab.until("1 of 3: step 1 of 3</span>")
    assert 'class="muted tool-progress" hx-swap-oob="true">1 of 3: step 1 of 3</span>' in shown
    await tab.until("Done.</p>")
    shown = "".join(tab.received)
    assert shown.index("1 of 3: step 1 of 3") < shown.index("3 steps done")  # while it ran
    await generation.wait_idle()
    assert result_sent(fake_anthropic)["content"] == "3 steps done"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_server_flooding_progress_reaches_the_tabs_as_a_few_short_lines(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__flood", {"count": 2000}), Reply.text("Survived.")
    )
    _, tab = await open_tab(owner, session)
    started = time.monotonic()
    await tab.send(message="Flood")
    await tab.until("Survived.</p>", timeout=30)
    seconds = time.monotonic() - started
    await generation.wait_idle()
    lines = re.findall(r'tool-progress" hx-swap-oob="true">([^<]*)</span>', "".join(tab.received))
    assert 1 <= len(lines) <= 4 * seconds + 1  # of 2,000 notifications, at most 4 a second
    assert all(len(line) <= 200 for line in lines)
    assert result_sent(fake_anthropic)["content"] == "flooded"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_servers_list_changed_notification_refreshes_the_tools_offered(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__grow", {}), Reply.text("Grown."), Reply.text("Seen.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Grow a tool")
    await tab.until("Grown.</p>")
    await generation.wait_idle()
    assert "mcp__workshop__grown" not in requests_tools(fake_anthropic, 0)
    await tab.send(message="What now?")
    await tab.until("Seen.</p>")
    await generation.wait_idle()
    assert "mcp__workshop__grown" in requests_tools(fake_anthropic, 2)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_servers_prompt_is_a_slash_command_whose_words_fill_its_arguments(
    owner, fake_anthropic, open_tab, servers, client
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.text("Reviewed."))
    _, tab = await open_tab(owner, session)  # a tab opens: the servers connect
    await hub.hub().tools()
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(f"/sessions/{session.pk}/")).content.decode()
    assert (
        '<strong>/mcp__workshop__review</strong> <span class="hint">&lt;path&gt; [focus]</span> '
        '<span class="badge">MCP prompt</span> <span class="muted">Ask for a review of a file.'
    ) in page

    await tab.send(message="/mcp__workshop__review")
    assert "/mcp__workshop__review needs path: /mcp__workshop__review &lt;path&gt; [focus]" in (
        await tab.until("needs path")
    )
    await tab.send(message='/mcp__workshop__review "src/parser.py" security')
    await tab.until("Reviewed.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"]
    assert sent == [
        {"type": "text", "text": "Please review src/parser.py, looking at security first."}
    ]
    await tab.send(message="/mcp__nowhere__review x")
    assert "Unknown command /mcp__nowhere__review." in await tab.until("Unknown command")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_image_result_is_shown_in_the_card_and_sent_to_the_model_as_an_image(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply.tool("mcp__workshop__picture", {}), Reply.text("A red dot."))
    _, tab = await open_tab(owner, session)
    await tab.send(message="Draw")
    await tab.until("A red dot.</p>")
    await generation.wait_idle()
    data = base64.b64encode(PNG).decode()
    shown = "".join(tab.received)
    image = f'src="data:image/png;base64,{data}" alt="Image from mcp__workshop__picture">'
    assert f'<img class="tool-image" {image}' in shown, shown[shown.find("tool-result") :][:600]
    content = result_sent(fake_anthropic)["content"]
    assert content[0]["type"] == "text" and content[0]["text"].startswith("One red pixel.")
    assert content[1] == {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data},
    }  # fmt: skip
    stored = await db_async(lambda: Entry.objects.get(role="toolResult").content)()
    assert stored[1] == {"type": "image", "data": data, "mimeType": "image/png"}


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_tool_definitions_count_toward_the_context_meter(
    owner, fake_anthropic, open_tab, servers
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(Reply(chunks=["Counted."], input_tokens=COUNTED, output_tokens=5))
    _, tab = await open_tab(owner, session)
    await tab.send(message="How full is the context?")
    await tab.until("Counted.</p>")
    html = await tab.until_idle()  # the status line as the reply ended
    await generation.wait_idle()
    request = fake_anthropic.requests[0]
    tools = tool_tokens(request["json"])
    assert tools > 500  # two servers' tools, with their schemas
    meter = request["tokens"] + tools + 5
    assert f"Context: {meter:,} tokens" in html, re.findall(r"Context: [\d,]+ tokens", html)


# --- servers: streamable HTTP, and one that cannot start ----------------------------------------
@pytest.fixture
def http_workshop(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The tests' own server over streamable HTTP, on a port of its own: its URL and notes."""
    notes = tmp_path / "http-notes"
    notes.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.mcp_servers.workshop", "http", str(port), str(notes)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process, "workshop over HTTP")
        yield f"http://127.0.0.1:{port}/mcp", notes
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.asyncio
async def test_a_streamable_http_server_is_listed_and_called_with_its_headers(
    http_workshop, tmp_path, settings
):
    url, notes = http_workshop
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"web": {
        "type": "http", "url": url, "headers": {"X-Agentweb-Test": "${WEB_TOKEN}"},
    }}}))  # fmt: skip
    os.environ["WEB_TOKEN"] = "token-123"
    settings.AGENTWEB_MCP_SERVERS = str(path)
    try:
        found = await hub.hub().tools()
        assert {t.tool.name for t in found} >= {"echo", "slow", "write"}
        assert {t.server for t in found} == {"web"}
        result = await hub.hub().servers["web"].call("echo", {"text": "over http", "times": 1})
        assert result.content[0].text == "over http"
        assert (notes / "calls").read_text() == "echo over http\n"
        sent = await hub.hub().servers["web"].call("header", {"name": "X-Agentweb-Test"})
        assert sent.content[0].text == "token-123"  # the operator's header, ${WEB_TOKEN} expanded
    finally:
        del os.environ["WEB_TOKEN"]
        await hub.close()


@pytest.mark.asyncio
async def test_an_http_server_that_dies_mid_call_is_an_error_result_and_is_failed_with_words(
    http_workshop, tmp_path, settings
):
    url, notes = http_workshop
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"web": {"type": "http", "url": url}}}))
    settings.AGENTWEB_MCP_SERVERS = str(path)
    settings.AGENTWEB_MCP_TIMEOUT = 10
    try:
        web = hub.hub().servers["web"]
        calling = asyncio.create_task(web.call("crash", {}))
        with pytest.raises(hub.ToolFailed) as failed:
            await calling
        assert str(failed.value) == ("the MCP server 'web' stopped: it stopped during a call")
        with pytest.raises(hub.ToolFailed) as again:  # nobody answers there now
            await web.call("echo", {"text": "anyone?"})
        assert str(again.value) == (
            "the MCP server 'web' is not available: ConnectError: All connection attempts failed"
        )
        assert web.state == "failed"
    finally:
        await hub.close()


@pytest.mark.asyncio
async def test_over_http_progress_arrives_a_slow_call_times_out_and_a_cancel_reaches_the_server(
    http_workshop, tmp_path, settings
):
    url, notes = http_workshop
    settings.AGENTWEB_MCP_SERVERS = servers_file(tmp_path, web={"type": "http", "url": url})
    settings.AGENTWEB_MCP_TIMEOUT = 1
    said: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        said.append((done, total, message))

    try:
        web = hub.hub().servers["web"]
        result = await web.call("steps", {"count": 2, "pause": 0.05}, progress)
        assert result.content[0].text == "2 steps done"
        assert said == [(1, 2, "step 1 of 2"), (2, 2, "step 2 of 2")]
        with pytest.raises(hub.ToolFailed) as late:
            await web.call("slow", {"seconds": 30})
        assert str(late.value) == "the call timed out after 1 s"
        # the timeout cancelled the call: the server was told
        assert await noted(notes / "cancelled", seconds=5) == "slow\n"
    finally:
        await hub.close()


@pytest.mark.asyncio
async def test_a_server_that_cannot_start_is_failed_with_its_error_and_the_others_still_serve(
    tmp_path, settings
):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no config here')"]},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    }}))  # fmt: skip
    settings.AGENTWEB_MCP_SERVERS = str(path)
    try:
        found = await hub.hub().tools()
        assert {t.server for t in found} == {"time"}
        broken = hub.hub().servers["broken"]
        assert broken.state == "failed"
        assert "no config here" in broken.error
    finally:
        await hub.close()


# --- the Tools page ----------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_tools_page_lists_each_server_its_state_and_its_tools(
    owner, async_client, servers, settings, tmp_path
):
    listed = json.loads(Path(settings.AGENTWEB_MCP_SERVERS).read_text())
    listed["mcpServers"]["broken"] = {
        "command": sys.executable,
        "args": ["-c", "raise SystemExit('bad token')"],
    }  # noqa: E501
    (tmp_path / "more.json").write_text(json.dumps(listed))
    settings.AGENTWEB_MCP_SERVERS = str(tmp_path / "more.json")
    settings.ANTHROPIC_API_KEY = ""
    await hub.hub().tools()  # started and listed (the page waits only a moment for them)
    await async_client.aforce_login(owner)
    page = (await async_client.get("/tools/")).content.decode()
    assert '<a href="/tools/">Tools</a>' in page
    assert '<h2 id="server-1">time</h2>' in page
    assert '<span class="badge">connected</span> · stdio · <code>' in page
    assert "<code>mcp__time__get_current_time</code>" in page
    assert (
        '<code>mcp__workshop__write</code>\n        <span class="badge">changes things: asks you first'
        in page
    )
    assert '<span class="badge">failed</span>' in page
    assert "bad token" in page
    assert "Tools need Claude: the offline model does not call them" in page


def gone(pid: int, seconds: float) -> bool:
    """Whether process `pid` ends (or is only a zombie left to reap) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_server_that_hangs_at_its_start_holds_neither_the_page_nor_the_next_turns(
    owner, async_client, settings, tmp_path
):
    starts, pid = tmp_path / "starts", tmp_path / "pid"
    hang = (
        f"import os, time; open({str(starts)!r}, 'a').write('start\\n'); "
        f"open({str(pid)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    )
    settings.AGENTWEB_MCP_SERVERS = servers_file(
        tmp_path, stuck={"command": sys.executable, "args": ["-c", hang]}
    )
    settings.AGENTWEB_MCP_CONNECT_SECONDS = 5
    try:
        await async_client.aforce_login(owner)
        started = time.monotonic()
        page = (await async_client.get("/tools/")).content.decode()
        assert time.monotonic() - started < 3 + 2  # the page's patience, and no more
        assert '<span class="badge">connecting</span>' in page
        assert await hub.hub().tools() == []  # the start times out: failed, in words
        stuck = hub.hub().servers["stuck"]
        assert (stuck.state, stuck.error) == ("failed", "it did not answer within 5 s")
        started = time.monotonic()
        assert await hub.hub().tools() == []  # the next turn does not wait for it again
        assert time.monotonic() - started < 0.5
        assert starts.read_text() == "start\n"  # started once, not at every turn
        assert await asyncio.to_thread(gone, int(pid.read_text()), 5)  # stopped, not left
        started = time.monotonic()
    finally:
        await hub.close()
    assert time.monotonic() - started < 1  # nothing of it left to wait for


@pytest.mark.django_db
def test_the_tools_page_says_when_no_server_is_configured(client, owner):
    client.force_login(owner)
    page = client.get("/tools/").content.decode()
    assert "No MCP servers are configured." in page


# --- the user's choices --------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_server_turned_off_for_all_sessions_and_on_again_for_one_is_offered_there_only(
    owner, fake_anthropic, open_tab, servers, async_client
):
    here = await db_async(make_session)(owner)
    elsewhere = await db_async(make_session)(owner)
    await async_client.aforce_login(owner)
    await async_client.post("/tools/choose/", {"on:workshop": "off", "on:time": ""})
    await async_client.post(
        f"/sessions/{here.pk}/tools/choose/", {"on:workshop": "on", "on:mcp__workshop__slow": "off"}
    )
    fake_anthropic.enqueue(Reply.text("Here."), Reply.text("Elsewhere."))
    for session, said in ((here, "Here."), (elsewhere, "Elsewhere.")):
        _, tab = await open_tab(owner, session)
        await tab.send(message="Which tools?")
        await tab.until(f"{said}</p>")
        await generation.wait_idle()
    offered_here, offered_elsewhere = (requests_tools(fake_anthropic, n) for n in (0, 1))
    assert "mcp__workshop__echo" in offered_here and "mcp__workshop__slow" not in offered_here
    assert not any(name.startswith("mcp__workshop__") for name in offered_elsewhere)
    assert "mcp__time__get_current_time" in offered_elsewhere

    page = (await async_client.get(f"/sessions/{here.pk}/tools/")).content.decode()
    assert "Tools in “" in page and '<option value="on" selected>On</option>' in page


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tool_always_allowed_runs_without_asking(
    owner, fake_anthropic, open_tab, servers, async_client
):
    await async_client.aforce_login(owner)
    await async_client.post("/tools/choose/", {"approval:mcp__workshop__write": "always"})
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__write", {"name": "trusted.txt"}), Reply.text("Done.")
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Write trusted.txt")
    await tab.until("Done.</p>")
    await generation.wait_idle()
    assert (servers / "written").read_text() == "trusted.txt\n"
    assert await db_async(ToolQuestion.objects.count)() == 0
    page = (await async_client.get("/tools/")).content.decode()
    assert '<option value="always" selected>Always allow</option>' in page


@pytest.mark.django_db
def test_choices_name_only_the_operators_servers_and_only_the_users_own_sessions(
    client, owner, other_user, settings, tmp_path
):
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"git": {"command": "x"}}}))
    settings.AGENTWEB_MCP_SERVERS = str(tmp_path / "mcp.json")
    theirs = make_session(other_user)
    client.force_login(owner)
    client.post("/tools/choose/", {"on:git": "off", "on:evil": "off", "on:mcp__evil__x": "off",
                                   "approval:mcp__git__commit": "always", "approval:mcp__git__log": "sudo"})  # fmt: skip  # noqa: E501
    assert sorted(ToolChoice.objects.values_list("name", "enabled", "approval")) == [
        ("git", False, ""),
        ("mcp__git__commit", None, "always"),
    ]
    assert client.post(f"/sessions/{theirs.pk}/tools/choose/", {"on:git": "on"}).status_code == 404
    assert ToolChoice.objects.filter(session=theirs).count() == 0
