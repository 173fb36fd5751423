"""What a tab's socket is sent, in messages daphne will send.

Daphne refuses to send a WebSocket message over its `--websocket_max_message_size` (1 MB by
default, which agentweb keeps: it bounds what a tab may send too) and closes the socket with
1011 instead; a tab that reconnects to the same catch-up meets the same refusal. A push made
of several parts (a catch-up's entries, an event and the entries ahead of it) goes in as few
messages as fit. A transcript pushed whole shows fewer of its latest entries when all of them
would not fit (the earlier ones load on demand, over HTTP). A part that fits in no message
(one entry of megabytes) goes as a notice to reload the page, which renders it over HTTP:
nothing is lost, and the socket stays open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

LIMIT = 1_000_000  # bytes a message, under daphne's 1 MB (1,048,576) and its frame's header
TOO_LARGE = "An update too large to show here as it happens: reload the page to see it."


def packed(parts: Iterable[str], too_large: Callable[[], str], limit: int = LIMIT) -> Iterator[str]:
    """`parts` (each whole: a fragment the page swaps by itself), in order, joined into
    messages of at most `limit` bytes each; a part larger than that, as `too_large()` (the
    notice saying TOO_LARGE)."""
    message: list[str] = []
    total = 0
    for part in parts:
        length = size(part)
        if length > limit:
            log.warning("a push of %d bytes sent as a notice to reload", length)
            part = too_large()
            length = size(part)
        if message and total + length > limit:
            yield "".join(message)
            message, total = [], 0
        message.append(part)
        total += length
    if message:
        yield "".join(message)


def size(text: str) -> int:
    """`text`'s UTF-8 length (an ASCII string's, most pushes', is its length: no encoding)."""
    return len(text) if text.isascii() else len(text.encode())
