"""A stdio MCP server cannot hold agentweb with one huge answer (issue 53, hostile servers):
its messages pass through a relay that refuses any longer than AGENTWEB_MCP_MESSAGE_BYTES, and
the call that asked for it fails with words the model reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from sessions import generation
from sessions.mcp import hub

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .mcp_servers import servers_file, workshop_spec

RELAY = Path(__file__).resolve().parents[1] / "sessions" / "mcp" / "bounded.py"

# A server that answers request 7 with a line of 100 MB, written 64 KB at a time (the server
# itself never holds it), then request 8 with a short one.
STREAMING = """
import sys
for line in sys.stdin:
    if '"id": 7' in line:
        sys.stdout.write('{"jsonrpc": "2.0", "id": 7, "result": {"text": "')
        for _ in range(1526):
            sys.stdout.write("x" * 65536)
        sys.stdout.write('"}}\\n')
    else:
        sys.stdout.write('{"jsonrpc": "2.0", "id": 8, "result": {"text": "short"}}\\n')
    sys.stdout.flush()
"""


# Runs the relay over STREAMING, asks for 7 then 8, and prints both answers, the seconds the
# first took and the peak memory of its children (the relay, the server): a process of its own,
# so that no other test's children count.
DRIVER = """
import json, resource, subprocess, sys, time
relay = subprocess.Popen(
    [sys.executable, "-I", sys.argv[1], "8000000", "--", sys.executable, "-c", sys.argv[2]],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
started = time.monotonic()
relay.stdin.write(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}\\n')
relay.stdin.flush()
answer = json.loads(relay.stdout.readline())
seconds = time.monotonic() - started
relay.stdin.write(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call"}\\n')
relay.stdin.flush()
after = json.loads(relay.stdout.readline())
relay.stdin.close()
code = relay.wait(10)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps([answer, after, code, seconds, peak]))
"""


def test_a_100_mb_answer_becomes_an_error_with_its_id_read_in_bounded_memory():
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(RELAY), STREAMING],
        capture_output=True,
        timeout=120,
        check=True,
    )
    answer, after, code, seconds, peak = json.loads(done.stdout)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32603,
            "message": "its answer of 100.0 MB is more than agentweb reads (8 MB): it was not read",
        },
    }
    assert after == {"jsonrpc": "2.0", "id": 8, "result": {"text": "short"}}
    assert code == 0
    assert peak < 60_000_000, f"{peak / 1e6:.0f} MB"  # never the answer's 100 MB
    assert seconds < 20  # read through, not gathered: about a second here


def test_an_answer_whose_id_comes_last_is_answered_with_that_id():
    """TypeScript's SDK writes a response's `result` first and its `id` last."""
    server = (
        "import sys\n"
        "for line in sys.stdin:\n"
        '    sys.stdout.write(\'{"result": {"text": "\' + \'y\' * 300 + \'"}, '
        '"jsonrpc": "2.0", "id": "call-3"}\\n\')\n'
        "    sys.stdout.flush()\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", str(RELAY), "100", "--", sys.executable, "-c", server],
        input=b'{"jsonrpc": "2.0", "id": "call-3", "method": "tools/call"}\n',
        capture_output=True,
        timeout=20,
    )
    assert json.loads(done.stdout) == {
        "jsonrpc": "2.0",
        "id": "call-3",
        "error": {
            "code": -32603,
            "message": "its answer of 0.0 MB is more than agentweb reads (0.0001 MB): "
            "it was not read",
        },
    }


def test_a_command_that_cannot_start_says_why_on_stderr():
    done = subprocess.run(
        [sys.executable, "-I", str(RELAY), "100", "--", "/nonexistent/mcp-server"],
        capture_output=True,
        timeout=20,
    )
    assert done.returncode == 127
    assert done.stderr == b"/nonexistent/mcp-server: No such file or directory\n"


@pytest_asyncio.fixture
async def workshop(settings: Any, tmp_path: Path) -> Any:
    notes = tmp_path / "notes"
    notes.mkdir()
    settings.AGENTWEB_MCP_SERVERS = servers_file(tmp_path, workshop=workshop_spec(notes))
    settings.AGENTWEB_MCP_MESSAGE_BYTES = 1_000_000
    yield notes
    await hub.close()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_tool_answer_past_the_bound_is_an_error_the_model_reads_and_the_server_goes_on(
    owner, fake_anthropic, open_tab, workshop
):
    session = await db_async(make_session)(owner)
    fake_anthropic.enqueue(
        Reply.tool("mcp__workshop__lines", {"count": 100_000}),  # 3.2 MB of text, twice
        Reply.tool("mcp__workshop__echo", {"text": "still here", "times": 1}),
        Reply.text("Carried on."),
    )
    _, tab = await open_tab(owner, session)
    await tab.send(message="Read the whole log")
    await tab.until("Carried on.</p>", timeout=30)
    await generation.wait_idle()
    refused, echoed = (
        fake_anthropic.requests[n]["json"]["messages"][-1]["content"][0] for n in (1, 2)
    )
    assert refused["is_error"] is True
    assert refused["content"].startswith(
        "The tool call failed: the server answered: its answer of "
    )
    assert refused["content"].endswith(" MB is more than agentweb reads (1 MB): it was not read")
    assert echoed["content"] == "still here"
