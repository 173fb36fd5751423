"""The loads' model: every request answered with the same paced reply, as the fake Anthropic
server (`tests.fake_anthropic`) sends it, at a fraction of its CPU.

The load's model shares the machine's two cores with the servers it measures, as the API's
machine would not. `FakeAnthropic` makes each event as it sends it (its JSON, a task's sleep
and a drain a token): at 400 streams of 40 tokens a second that was a third of a core. Here
the reply's bytes are made once, from the same events (`_events`, `_wire`), and each
connection is a protocol whose timer writes its next event: no task, future or JSON a token.

What the load reads of it, one JSON line each on stdout as it happens (`FakeServerProcess`
reads them): each request's arrival and last message, and each reply the client left early.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fake_anthropic import Reply, _events, _wire, chunked, count_tokens  # noqa: E402

HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)


def wire(reply: Reply) -> list[bytes]:
    """`reply`'s events as HTTP chunks, one item an event, as `FakeAnthropic` writes them. A
    plain text reply only: no hold, drop, gzip or ragged wire."""
    if reply.mode != "text" or reply.hold_after >= 0 or reply.gzip or reply.ragged:
        raise ValueError("the loads' model serves plain text replies")
    return [chunked(b"".join(_wire(event, data, reply))) for event, data in _events(reply)]


class PacedModel:
    """Serves `choose(body)`'s reply to each request (its events, and the seconds between
    them: the first goes at once), then closes the connection. `report` is told each request
    and each early hang-up."""

    def __init__(
        self, choose: Callable[[dict[str, Any]], tuple[list[bytes], float]],
        report: Callable[[dict[str, Any]], None],
    ) -> None:  # fmt: skip
        self.choose, self.report = choose, report

    def protocol(self) -> asyncio.Protocol:
        return _Connection(self)


class _Connection(asyncio.Protocol):
    def __init__(self, model: PacedModel) -> None:
        self.model = model
        self.received = b""
        self.events: list[bytes] = []
        self.delay = 0.0
        self.sent = 0
        self.timer: asyncio.TimerHandle | None = None
        self.paused = self.finished = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.events:
            return  # one request a connection: every reply says `connection: close`
        self.received += data
        head, found, body = self.received.partition(b"\r\n\r\n")
        if not found:
            return
        lines = head.decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines[1:])
        headers = {name.strip().lower(): value.strip() for name, _, value in fields}
        if len(body) < int(headers.get("content-length", "0")):
            return
        request = json.loads(body or b"{}")
        if lines[0].split(" ")[1].startswith("/v1/messages/count_tokens"):
            answer = json.dumps({"input_tokens": count_tokens(request)}).encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(answer), answer)
            )
            self.transport.close()
            return
        last = request.get("messages", [])[-1:]
        self.model.report({"arrived": time.monotonic(), "json": {"messages": last}})
        self.events, self.delay = self.model.choose(request)
        self.transport.write(HEAD)
        self._next()

    def _next(self) -> None:
        self.timer = None
        if self.paused:
            return  # resume_writing goes on
        if self.sent == len(self.events):
            self.transport.write(b"0\r\n\r\n")
            self.finished = True
            self.transport.close()
            return
        self.transport.write(self.events[self.sent])
        self.sent += 1
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.delay, self._next)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.timer is None and self.events:
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.events and not self.finished:  # the client left before the reply's end
            self.model.report({"disconnected_at": time.monotonic()})


def serve(responder: Callable[[dict[str, Any]], Reply], *, reported: bool) -> None:
    """Print the port, then serve `responder`'s replies until killed (text replies whose
    events are `delay` apart); with `reported`, each request and early hang-up on stdout."""
    made: dict[tuple[float, tuple[str, ...]], list[bytes]] = {}

    def choose(body: dict[str, Any]) -> tuple[list[bytes], float]:
        reply = responder(body)
        key = (reply.delay, tuple(reply.chunks))
        if key not in made:
            made[key] = wire(reply)
        return made[key], reply.delay

    lines: list[str] = []

    def report(found: dict[str, Any]) -> None:  # written once a turn of the loop
        if not reported:
            return
        if not lines:
            asyncio.get_running_loop().call_soon(flush)
        lines.append(json.dumps(found))

    def flush() -> None:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.flush()
        lines.clear()

    async def main() -> None:
        model = PacedModel(choose, report)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(model.protocol, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())
