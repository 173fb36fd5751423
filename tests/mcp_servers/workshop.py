"""The tests' own MCP server (issue 53), written with the SDK's `MCPServer`: tools that are
slow, fail, crash, answer at length or in HTML, and one that changes things. Run as
`python -m tests.mcp_servers.workshop [stdio|http PORT] NOTES_FOLDER`; what happens to its
calls (a call made, a call cancelled) is written to files in NOTES_FOLDER, where a test
reads it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("workshop")
notes = Path(sys.argv[-1])


def note(name: str, text: str = "") -> None:
    with (notes / name).open("a") as file:
        file.write(text + "\n")


@server.tool(annotations=READ_ONLY)
def echo(text: str, times: int = 1) -> str:
    """Say the text back, `times` times over."""
    note("calls", f"echo {text}")
    return " ".join([text] * times)


@server.tool(annotations=READ_ONLY)
async def slow(seconds: float) -> str:
    """Wait `seconds`, then say so."""
    note("calls", "slow")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        note("cancelled", "slow")
        raise
    return f"waited {seconds:g} s"


@server.tool(annotations=READ_ONLY)
async def steps(count: int, ctx: Context, pause: float = 0.4) -> str:
    """Work in `count` steps, saying each (MCP progress notifications)."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step} of {count}")
        await anyio.sleep(pause)
    return f"{count} steps done"


@server.tool(annotations=READ_ONLY)
async def flood(count: int, ctx: Context) -> str:
    """`count` progress notifications at once, then a result."""
    for step in range(count):
        await ctx.report_progress(step, count, "x" * 10_000)
    return "flooded"


@server.tool(annotations=READ_ONLY)
async def grow(ctx: Context) -> str:
    """Add the tool `grown`, and tell the client its list changed."""

    def grown() -> str:
        """A tool that was not there at first."""
        return "grown"

    server.add_tool(grown, annotations=READ_ONLY)
    await ctx.notify_tools_changed()  # to `subscriptions/listen` streams (2026-07-28)
    return "added grown"


@server.tool(annotations=READ_ONLY)
def header(name: str, ctx: Context) -> str:
    """The value of request header `name` (over HTTP; "" on stdio)."""
    return (ctx.headers or {}).get(name.lower(), "")


@server.tool(annotations=READ_ONLY)
def fail(why: str) -> str:
    """Fail with `why` (an error result the model reads)."""
    raise ToolError(why)


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """Die mid-call, as a server that crashes does."""
    note("calls", "crash")
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def lines(count: int) -> str:
    """`count` numbered lines of text."""
    return "\n".join(f"line {n:06d} of the long result" for n in range(1, count + 1))


# A 1×1 red PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)


@server.tool(annotations=READ_ONLY)
def picture() -> list[str | Image]:
    """A picture, and words about it."""
    return ["One red pixel.", Image(data=PNG, format="png")]


@server.tool(annotations=READ_ONLY)
def page() -> str:
    """Some HTML, with a script in it."""
    return '<script>alert("owned")</script><img src=x onerror=alert(1)>'


@server.prompt()
def review(path: str, focus: str = "correctness") -> str:
    """Ask for a review of a file."""
    return f"Please review {path}, looking at {focus} first."


@server.tool()
def write(name: str) -> str:
    """Write a file (a tool that changes things: not read-only)."""
    note("written", name)
    return f"wrote {name}"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
