"""Server-sent events, read from a response's lines (the WHATWG rules a reader of the Messages
API needs: `event` and `data` fields, multi-line data, comments; no `id` or `retry`).

The SDK's own reader builds a typed model of every event, which is half of its time per event
on a stream of one-token deltas (bench/relay_browser.py); agentweb reads the JSON itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator


async def events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) of each event, in order; an event without a name is `message`."""
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:  # a blank line ends the event
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
            continue
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        # a line starting with ":" is a comment; id and retry mean nothing here
    if data:  # a stream that ends without the last blank line still ends its event
        yield name or "message", "\n".join(data)
