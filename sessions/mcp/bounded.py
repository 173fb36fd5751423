"""A stdio MCP server run with a bound on the size of what it says (issue 53): the operator's
command started under this relay, which passes its messages on line by line and refuses a
line longer than the bound.

The SDK's stdio client reads a line by adding each 64 KB it receives to what it has of the
line so far, on the event loop: a server that answers 100 MB holds agentweb's loop for more
than a minute and its memory grows by the gigabyte (measured 6 Dec: 97 MB in 79 s, 621 MB).
Here a line over the bound is read through and dropped, never kept whole: a response is
answered in its place by a JSON-RPC error with its id, which the call reports as its failure;
anything else is dropped with a line on stderr.

It runs as its own process (`python -I bounded.py BYTES -- command args…`), with the standard
library only: the SDK's client starts it, writes to it, and ends it as it would the server.

Run: python sessions/mcp/bounded.py 8000000 -- uvx mcp-server-time
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from typing import IO

CHUNK = 65_536
HEAD, TAIL = 4_096, 512  # what is kept of a line past the bound: enough for its id
_KEY = rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*' + _KEY)  # Python's SDK writes it first
ID_AT_END = re.compile(rb",\s*" + _KEY + rb"\s*\}\s*$")  # TypeScript's, last
REQUEST = re.compile(rb'^\s*\{[^{\[]*"method"\s*:')  # a request or notification, not an answer


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        sys.stderr.write("usage: bounded.py BYTES -- command [args…]\n")
        return 2
    bound, command = int(argv[0]), argv[2:]
    try:
        server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as error:
        sys.stderr.write(f"{command[0]}: {error.strerror or error}\n")
        return 127
    assert server.stdin is not None and server.stdout is not None
    threading.Thread(target=_pass_on, args=(server.stdin,), daemon=True).start()
    with contextlib.suppress(BrokenPipeError):  # the client is gone: so is the relay
        _relay(server.stdout.fileno(), sys.stdout.fileno(), bound)
    return server.wait()


def _pass_on(server_in: IO[bytes]) -> None:
    """What the client writes, to the server, until the client closes its end; then the
    server's stdin is closed too, which is how a stdio server is told to end."""
    with contextlib.suppress(OSError), server_in:
        while chunk := os.read(sys.stdin.fileno(), CHUNK):
            server_in.write(chunk)
            server_in.flush()


def _relay(source: int, sink: int, bound: int) -> None:
    """The server's lines to the client, each whole, those over `bound` bytes replaced."""
    parts: list[bytes] = []  # the line so far, while it is within the bound
    size = 0
    over: list[bytes] | None = None  # past the bound: its start, and its last bytes
    while chunk := os.read(source, CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            piece = chunk[start:end]
            if over is None and size + len(piece) < bound:
                _write(sink, b"".join([*parts, piece, b"\n"]))
            else:
                start_of = over[0] if over else b"".join(parts)[:HEAD]
                tail = ((over[1] if over else b"".join(parts)[-TAIL:]) + piece)[-TAIL:]
                _refused(sink, (start_of + piece)[:HEAD], tail, size + len(piece), bound)
            parts, size, over, start = [], 0, None, end + 1
        rest = chunk[start:]
        size += len(rest)
        if over is not None:
            over[1] = (over[1] + rest)[-TAIL:]
        elif size >= bound:  # past the bound: only its start and its end are kept
            line = b"".join([*parts, rest])
            over, parts = [line[:HEAD], line[-TAIL:]], []
        elif rest:
            parts.append(rest)


def _refused(sink: int, head: bytes, tail: bytes, size: int, bound: int) -> None:
    """A line past the bound: a response answered by an error with its id (where the server
    wrote it, at the start or the end), anything else dropped."""
    found = ID.match(head) or ID_AT_END.search(tail)
    said = f"{size / 1e6:.1f} MB is more than agentweb reads ({bound / 1e6:g} MB)"
    if found is None or REQUEST.match(head):
        sys.stderr.write(f"a message of {said}: it was dropped\n")
        return
    error = {"code": -32603, "message": f"its answer of {said}: it was not read"}
    answer = {"jsonrpc": "2.0", "id": json.loads(found.group(1)), "error": error}
    _write(sink, json.dumps(answer).encode() + b"\n")


def _write(sink: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(sink, view) :]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
