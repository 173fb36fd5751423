"""Server-sent events, read from a response body's bytes as they arrive (the WHATWG rules a
reader of the Messages API needs: `event` and `data` fields, multi-line data, comments, lines
ended by CRLF, LF or CR; no `id` or `retry`).

The SDK's own reader builds a typed model of every event, which is half of its time per event
on a stream of one-token deltas (bench/relay_browser.py); agentweb reads the JSON itself, and
splits the body into lines itself: one split a chunk, where the SDK's line reader is a chain of
generators a line (bench/read_paths.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator


async def events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) of each event, in order; an event without a name is `message`."""
    event = _Event()
    rest = b""  # a line not ended yet
    async for chunk in chunks:
        rest += chunk
        if b"\r" in rest:
            # A CR at the very end may be half of a CRLF: it waits for the next chunk.
            held = rest.endswith(b"\r")
            rest = rest[:-1] if held else rest
            rest = rest.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
        *lines, rest = rest.split(b"\n")
        for line in lines:  # each whole: no UTF-8 sequence is cut at a newline
            if (ended := event.read(line.decode(errors="replace"))) is not None:
                yield ended
    # A stream that ends without its last newline, or its last blank line, still ends its event.
    for last in (rest.rstrip(b"\r").decode(errors="replace"), ""):
        if (ended := event.read(last)) is not None:
            yield ended


class _Event:
    """The event being read, line by line."""

    def __init__(self) -> None:
        self.name = ""
        self.data: list[str] = []

    def read(self, line: str) -> tuple[str, str] | None:
        """The event this line ends (a blank line), if any."""
        if not line:
            ended = (self.name or "message", "\n".join(self.data)) if self.data else None
            self.name, self.data = "", []
            return ended
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self.data.append(value)
        elif field == "event":
            self.name = value
        # a line starting with ":" is a comment; id and retry mean nothing here
        return None
