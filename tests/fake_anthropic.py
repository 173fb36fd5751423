"""A local HTTP server speaking the Anthropic Messages streaming protocol (SSE, chunked HTTP/1.1).

The real SDK talks to it over a real socket, so cancellation, dropped
connections and error events behave as they do against the real API.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

# The fake's own tokenizer: not agentweb's estimate, so a budget that trusts its estimate
# too much fails. Roughly BPE-like: short words with their leading space, digit groups,
# whitespace runs, and every other character (punctuation, CJK, emoji) on its own.
TOKEN = re.compile(r" ?[A-Za-z]{1,8}| ?\d{1,3}|\s+|[^\sA-Za-z\d]")


def count_tokens(body: dict[str, Any]) -> int:
    """Input tokens of a Messages request as this fake counts them."""
    texts = [body["system"]] if isinstance(body.get("system"), str) else []
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [block.get("text", "") for block in blocks if isinstance(block, dict)]
    return sum(len(TOKEN.findall(text)) for text in texts) + 4 * len(body.get("messages", []))


def tool_tokens(body: dict[str, Any]) -> int:
    """The tokens of a request's tool definitions, as this fake counts them (the API counts
    them as input)."""
    return len(TOKEN.findall(json.dumps(body.get("tools", []))))


COUNTED = -1  # a reply's input_tokens: the request's own count, tools included


@dataclass
class Reply:
    """What the server does with the next request.

    mode: text | error_event | drop | no_stop | empty | status | garbage (an event that is
    not JSON, halfway)
    """

    chunks: list[str] = field(
        default_factory=lambda: ["Hello", " from", " the", " fake", " model."]
    )
    mode: str = "text"
    delay: float = 0.0
    status: int = 200
    error_type: str = "overloaded_error"
    input_tokens: int = 42
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    message: str = ""  # the error message of a `status` reply
    headers: dict[str, str] = field(default_factory=dict)  # extra headers of a `status` reply
    hold_after: int = -1  # stop after this many chunks until released (-1: never)
    thinking: list[str] = field(default_factory=list)  # thinking_delta chunks before the text
    signature: str = "fake-signature"  # the signature_delta that ends the thinking
    # tool_use blocks after the text: (tool name, its input as JSON text, sent in two pieces)
    tool_uses: list[tuple[str, str]] = field(default_factory=list)
    stop_reason: str = ""  # set by the server: the reply stopped at the request's max_tokens
    # False: the reply is sent whole whatever the request's max_tokens (the benches' streams
    # of 20,000 events, longer than any model's output limit)
    within_max_tokens: bool = True
    # True: the wire as a proxy may cut it: CRLF line ends, a comment and a ping before each
    # event, and every event sent in HTTP chunks of 7 bytes
    ragged: bool = False
    # True: the body gzip-encoded (`content-encoding: gzip`), each event flushed as it goes
    gzip: bool = False

    def within(self, max_tokens: int) -> Reply:
        """The reply as the API sends it for `max_tokens`: text past the limit is never
        written, and the stop reason says so (`max_tokens`)."""
        kept: list[str] = []
        used = 0
        for chunk in self.chunks:
            tokens = TOKEN.findall(chunk)
            if used + len(tokens) > max_tokens:
                kept.append("".join(tokens[: max_tokens - used]))
                return replace(self, chunks=kept, tool_uses=[], stop_reason="max_tokens")
            kept.append(chunk)
            used += len(tokens)
        return self

    @classmethod
    def tool(cls, name: str, arguments: Any, *, text: str = "", raw: str | None = None) -> Reply:
        """A reply that calls a tool (after `text`, if any); `raw`: the input as sent, when it
        is not `arguments` as JSON (malformed input)."""
        chunks = [text] if text else []
        return cls(
            chunks=chunks, tool_uses=[(name, raw if raw is not None else json.dumps(arguments))]
        )

    @classmethod
    def text(cls, text: str, *, delay: float = 0.0, pieces: int = 0) -> Reply:
        words = text.split(" ")
        chunks = [w if i == 0 else " " + w for i, w in enumerate(words)]
        return cls(chunks=chunks, delay=delay)

    @classmethod
    def held(cls, before: list[str], after: list[str] | None = None) -> Reply:
        """Send `before`, then wait until the test calls `release()` (or the client leaves)."""
        return cls(chunks=[*before, *(after or ["."])], hold_after=len(before))

    @classmethod
    def held_tokens(cls, before: int, after: int = 1) -> Reply:
        """`token0 ` … `token<before - 1> `, then held until the test releases it (or the
        client leaves); then the other `after` tokens."""
        tokens = [f"token{i} " for i in range(before + after)]
        return cls.held(tokens[:before], tokens[before:])

    @classmethod
    def slow(cls, tokens: int = 400, delay: float = 0.05) -> Reply:
        return cls(chunks=[f"token{i} " for i in range(tokens)], delay=delay)


class FakeAnthropic:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        # Answers the next request when no reply is queued (a test's stand-in for a model).
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.window = 200_000  # the context window every model of this fake has
        self.requests: list[dict[str, Any]] = []
        self.counts: list[dict[str, Any]] = []  # count_tokens requests
        self.holding = 0  # streams waiting at their hold point now
        self._gate: asyncio.Event | None = None
        self.disconnects = 0
        self.disconnected_at: list[float] = []  # when each client that left early did
        self.completed = 0
        # As the API does: a stream read to its end leaves its connection open for the next
        # request. Off by default: every reply then says `connection: close`.
        self.keep_alive = False
        self.connections = 0  # connections accepted
        self._changed = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    # --- control from tests ------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def reset(self) -> None:
        with self._changed:
            self.replies.clear()
            self.responder = None
            self.window = 200_000
            self.requests.clear()
            self.counts.clear()
            self.disconnects = 0
            self.disconnected_at.clear()
            self.completed = 0
            self.keep_alive = False
            self.connections = 0
        if self._gate is not None:  # a new test: held replies hold again
            self._loop.call_soon_threadsafe(self._gate.clear)

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def wait_for_hold(self, timeout: float = 10.0) -> bool:
        """Wait until a held reply has sent what comes before its hold point."""
        return self.wait_for(lambda: self.holding > 0, timeout)

    def release(self) -> None:
        """Let held replies go on (and every later one through its hold point)."""
        gate = self._gate
        if gate is not None:
            self._loop.call_soon_threadsafe(gate.set)

    def wait_for_disconnect(self, timeout: float = 10.0) -> bool:
        return self.wait_for(lambda: self.disconnects > 0, timeout)

    def start(self) -> FakeAnthropic:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        self.port = started.result(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    # --- the server -------------------------------------------------------------------
    async def _serve(self) -> int:
        self._gate = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    def _note(self, at: float | None = None, **changes: int) -> None:
        """Counters moved by `changes`; a disconnect is stamped `at` the moment the client
        left, when known, else now."""
        with self._changed:
            for name, step in changes.items():
                setattr(self, name, getattr(self, name) + step)
            if "disconnects" in changes:
                self.disconnected_at.append(at if at is not None else time.monotonic())
            self._changed.notify_all()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._note(connections=1)
        try:
            ahead: bytes | None = b""
            while ahead is not None:  # with keep_alive, the next request on this connection
                ahead = await self._one_request(reader, writer, ahead)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ahead: bytes = b""
    ) -> bytes | None:
        """Serve one request (`ahead`: its first bytes, read already). None: the connection
        closes after it; else a stream read to its end with `keep_alive` on, and the bytes of
        the next request read meanwhile."""
        head = ahead + await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        path = lines[0].split(" ")[1]
        request = {"path": path, "headers": headers, "json": json.loads(body or b"{}")}
        request["arrived"] = time.monotonic()  # benches split a latency at it
        request["tokens"] = count_tokens(request["json"])
        if path.startswith("/v1/messages/count_tokens"):
            with self._changed:
                self.counts.append(request)
            await _respond_json(writer, 200, {"input_tokens": request["tokens"]})
            return None
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()
            refusal = self._too_long(request)
            if refusal:
                reply = refusal
            elif self.replies:
                reply = self.replies.popleft()
            else:
                reply = self.responder(request["json"]) if self.responder else Reply()
        if reply.input_tokens == COUNTED:  # as the API reports: the request's tools included
            counted = request["tokens"] + tool_tokens(request["json"])
            reply = replace(reply, input_tokens=counted)
        limited = reply.within_max_tokens and isinstance(request["json"].get("max_tokens"), int)
        if reply.mode == "text" and limited:
            reply = reply.within(request["json"]["max_tokens"])
        if reply.mode == "status":
            message = reply.message or f"fake {reply.error_type}"
            await _respond_json(
                writer,
                reply.status,
                {"type": "error", "error": {"type": reply.error_type, "message": message}},
                reply.headers,
            )
            self._note(completed=1)
            return None
        keep_alive = self.keep_alive
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            + (b"content-encoding: gzip\r\n" if reply.gzip else b"")
            + b"transfer-encoding: chunked\r\n"
            + (b"connection: keep-alive\r\n\r\n" if keep_alive else b"connection: close\r\n\r\n")
        )
        encoder = zlib.compressobj(wbits=31) if reply.gzip else None
        eof = asyncio.ensure_future(reader.read(1))  # b"" when the client hangs up
        left: list[float] = []  # when it did: a paced reply notices at its next event
        eof.add_done_callback(lambda _: left.append(time.monotonic()))
        try:
            for event, data in _events(reply):
                if event == "__drop__":
                    writer.transport.abort()
                    return None
                if event == "__hold__":
                    await self._hold(eof)
                    continue
                if eof.done():
                    self._note(disconnects=1, at=left[0] if left else None)
                    return None
                for chunk in _wire(event, data, reply):
                    if encoder is not None:
                        chunk = encoder.compress(chunk) + encoder.flush(zlib.Z_SYNC_FLUSH)
                    writer.write(chunked(chunk))
                await writer.drain()
                if reply.delay:  # (a plain sleep: a wait on `eof` too cost a fifth of the CPU)
                    await asyncio.sleep(reply.delay)
            if encoder is not None:
                tail = encoder.flush()
                writer.write(chunked(tail))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            request["ended"] = time.monotonic()  # benches split a round trip at it
            self._note(completed=1)
        except ConnectionError:
            self._note(disconnects=1)
            return None
        finally:
            eof.cancel()
        if not keep_alive:
            return None
        if not eof.done():  # (cancelled just now: nothing of the next request read)
            return b""
        # The next request's first byte; b"" or an error: the client left as the reply ended.
        return (None if eof.exception() else eof.result()) or None

    async def _hold(self, eof: asyncio.Future[bytes]) -> None:
        """Wait at a held reply's hold point: for `release()`, or for the client to leave."""
        assert self._gate is not None
        self._note(holding=1)
        try:
            released = asyncio.ensure_future(self._gate.wait())
            await asyncio.wait({eof, released}, return_when=asyncio.FIRST_COMPLETED)
            released.cancel()
        finally:
            self._note(holding=-1)

    def _too_long(self, request: dict[str, Any]) -> Reply | None:
        """The API's refusals of a request that does not fit the window, word for word."""
        tokens, output = request["tokens"], int(request["json"].get("max_tokens", 0))
        if tokens > self.window:
            message = f"prompt is too long: {tokens} tokens > {self.window} maximum"
        elif tokens + output > self.window:
            message = (
                f"input length and `max_tokens` exceed context limit: {tokens} + {output} > "
                f"{self.window}, decrease input length or `max_tokens` and try again"
            )
        else:
            return None
        return Reply(mode="status", status=400, error_type="invalid_request_error", message=message)


async def _respond_json(
    writer: asyncio.StreamWriter,
    status: int,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    data = json.dumps(payload).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    writer.write(
        f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(data)}\r\n{extra}"
        "connection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()


def chunked(data: bytes) -> bytes:
    """`data` as one chunk of a chunked HTTP/1.1 body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _wire(event: str, data: dict[str, Any], reply: Reply) -> list[bytes]:
    """One event as the server's HTTP chunks."""
    body = "{not json" if event == "__garbage__" else json.dumps(data)
    name = "content_block_delta" if event == "__garbage__" else event
    if not reply.ragged:
        return [f"event: {name}\ndata: {body}\n\n".encode()]
    ping = 'event: ping\r\ndata: {"type": "ping"}\r\n\r\n'
    text = f": keep-alive\r\n\r\n{ping}event: {name}\r\ndata: {body}\r\n\r\n".encode()
    return [text[at : at + 7] for at in range(0, len(text), 7)]


def _events(reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
    """The reply's events, each made as it is sent: a paced stream holds none ahead (with
    hundreds streaming at once, events made in advance kept the collector busy)."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {
                "input_tokens": reply.input_tokens, "output_tokens": 0,
                "cache_read_input_tokens": reply.cache_read_tokens,
                "cache_creation_input_tokens": reply.cache_write_tokens,
            },
        },
    }  # fmt: skip
    yield "message_start", start
    chunks = [] if reply.mode == "empty" else reply.chunks
    text_index = 1 if reply.thinking else 0
    if reply.thinking:
        yield from _thinking_events(reply)
    if chunks:
        block = {"type": "text", "text": ""}
        yield "content_block_start", {
            "type": "content_block_start", "index": text_index, "content_block": block
        }  # fmt: skip
    for i, text in enumerate(chunks):
        if i == reply.hold_after:
            yield "__hold__", {}
        if reply.mode in ("error_event", "drop", "garbage") and i == max(1, len(chunks) // 2):
            if reply.mode == "garbage":
                yield "__garbage__", {}
            elif reply.mode == "drop":
                yield "__drop__", {}
            else:
                error = {"type": reply.error_type, "message": "fake mid-stream error"}
                yield "error", {"type": "error", "error": error}
            return
        delta = {"type": "text_delta", "text": text}
        yield "content_block_delta", {
            "type": "content_block_delta", "index": text_index, "delta": delta
        }  # fmt: skip
    if chunks:
        yield "content_block_stop", {"type": "content_block_stop", "index": text_index}
    index = text_index + (1 if chunks else 0)
    for number, (name, raw) in enumerate(reply.tool_uses):
        yield from _tool_use_events(index + number, f"toolu_fake_{index + number}", name, raw)
    stop_reason = reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    if reply.mode != "no_stop":
        yield "message_stop", {"type": "message_stop"}


def _tool_use_events(index: int, call_id: str, name: str, raw: str) -> list[tuple[str, Any]]:
    """A tool_use block as the API streams it: its start, its input JSON in pieces, its stop."""
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    half = len(raw) // 2
    return [
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
        *(
            ("content_block_delta", {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": piece}})
            for piece in (raw[:half], raw[half:])
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]  # fmt: skip


def _thinking_events(reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    """A thinking block at index 0, as the API streams extended thinking."""
    block = {"type": "thinking", "thinking": "", "signature": ""}
    events: list[tuple[str, dict[str, Any]]] = [
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
    ]
    for text in reply.thinking:
        delta = {"type": "thinking_delta", "thinking": text}
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    signature = {"type": "signature_delta", "signature": reply.signature}
    events.append(
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": signature})
    )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    return events
