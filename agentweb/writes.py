"""Daphne's sockets written to at once, not when the reactor next says they can be.

Twisted buffers every write and sends it when the event loop reports the socket writable:
each WebSocket frame costs registering the socket for writing (a Handle and an `epoll_ctl`),
a turn of the loop for the report, and unregistering it (another `epoll_ctl`). With 200 tabs
streaming that machinery was a tenth of the server's loop (docs/PERFORMANCE.md). asyncio's own
transports send at once when nothing is waiting to go, and buffer only what the socket did not
take: here Twisted's TCP connections do the same. A connection with data already waiting, one
being closed, or one under TLS writes as Twisted does.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet import tcp

log = logging.getLogger(__name__)

_buffered = tcp.Connection.write
# What the write reads of a connection, Twisted's own (26.x): a Twisted without them keeps its
# own writes.
_READS = ("connected", "TLS", "disconnecting", "_writeDisconnected", "dataBuffer", "offset")


def _write(self: Any, data: bytes) -> None:
    if (
        type(data) is bytes
        and data
        and self.connected
        and not self.TLS
        and not self.disconnecting
        and not self._writeDisconnected
        and not getattr(self, "_tempDataBuffer", True)
        and len(self.dataBuffer) == self.offset
    ):
        try:
            sent = self.socket.send(data)
        except OSError:  # full (BlockingIOError), or broken: the reactor's write finds the
            sent = 0  # error and closes as Twisted does
        if sent == len(data):
            return
        data = data[sent:]
    _buffered(self, data)


def write_at_once() -> None:
    """From now on, in this process."""
    if missing := [name for name in _READS if not hasattr(tcp.Connection, name)]:
        log.warning("Twisted's connections have no %s: they keep their own writes", missing)
        return
    tcp.Connection.write = _write  # type: ignore[method-assign]
