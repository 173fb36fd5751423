"""Providers: Claude through the real SDK against the fake server, and the offline model."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace

from sessions.agent.provider import provider_for
from sessions.offline import OfflineModel, respond
from sessions.providers import ProviderError, StreamEnd, TextDelta, ThinkingDelta, ToolCall
from sessions.providers.anthropic import AnthropicProvider
from sessions.providers.local import LocalProvider
from sessions.providers.sse import events as sse_events
from sessions.tokens import Usage

from .conftest import FAKE_MODEL
from .fake_anthropic import Reply

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def anthropic_provider(fake) -> AnthropicProvider:
    return AnthropicProvider(model=FAKE_MODEL, api_key="test-key", base_url=fake.url, max_retries=0)


async def collect(provider, messages=MESSAGES):
    return [event async for event in provider.stream(messages)]


@pytest.mark.asyncio
async def test_claude_streams_text_deltas_then_usage(fake_anthropic):
    fake_anthropic.enqueue(Reply.text("Hello there world"))
    events = await collect(anthropic_provider(fake_anthropic))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there world"
    assert events[-1] == StreamEnd(events[-1].usage, "end_turn")
    assert events[-1].usage.input == 42
    request = fake_anthropic.requests[-1]
    assert request["path"] == "/v1/messages"
    assert request["json"]["model"] == FAKE_MODEL
    assert request["json"]["stream"] is True
    assert request["json"]["messages"] == MESSAGES


@pytest.mark.parametrize(
    "wire",
    [{}, {"ragged": True}, {"gzip": True}],
    ids=["tidy wire", "ragged wire", "gzip-encoded wire"],
)
@pytest.mark.asyncio
async def test_claude_keeps_thinking_text_tool_calls_usage_and_the_stop_reason(
    fake_anthropic, wire
):
    fake_anthropic.enqueue(
        Reply(
            thinking=["Weighing ", "the parser."],
            chunks=["Reading ", "the file."],
            tool_uses=[("todo_write", '{"todos": [{"content": "parse", "status": "pending"}]}')],
            input_tokens=1200,
            output_tokens=85,
            cache_read_tokens=900,
            cache_write_tokens=300,
            **wire,
        )
    )
    events = await collect(anthropic_provider(fake_anthropic))
    assert events == [
        ThinkingDelta("Weighing "),
        ThinkingDelta("the parser."),
        ThinkingDelta("", signature="fake-signature"),
        TextDelta("Reading "),
        TextDelta("the file."),
        ToolCall(
            "toolu_fake_2",
            "todo_write",
            {"todos": [{"content": "parse", "status": "pending"}]},
            '{"todos": [{"content": "parse", "status": "pending"}]}',
        ),
        StreamEnd(Usage(input=1200, output=85, cache_read=900, cache_write=300), "tool_use"),
    ]


@pytest.mark.asyncio
async def test_server_sent_events_are_read_by_the_standards_rules():
    async def chunks():  # as a body arrives: cut anywhere, lines ended by LF, CRLF or CR
        for chunk in [b": a comment\ndata: first\r", b"\ndata:second\n\n\revent: na", b"med\r\n"]:
            yield chunk
        for chunk in [b'data: {"a": 1}\nid: 7\nretry: 10\n\n', b'data: "caf\xc3', b'\xa9"\r\r']:
            yield chunk
        yield b"data: unended"

    assert [event async for event in sse_events(chunks())] == [
        ("message", "first\nsecond"),
        ("named", '{"a": 1}'),
        ("message", '"café"'),
        ("message", "unended"),
    ]


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        (
            Reply(mode="status", status=429, error_type="rate_limit_error"),
            "rate_limited",
            "rate limited",
        ),
        (
            Reply(mode="status", status=529, error_type="overloaded_error"),
            "overloaded",
            "overloaded",
        ),
        (Reply(mode="error_event", error_type="overloaded_error"), "overloaded", "overloaded"),
        (Reply(mode="drop"), "network", "network connection lost"),
        (Reply(mode="garbage"), "api", "the API sent an event agentweb cannot read"),
        (
            Reply(mode="error_event", error_type="invalid_request_error"),
            "api",
            "API error: fake mid-stream error",
        ),
        (Reply(mode="no_stop"), "network", "ended before"),
        (
            Reply(mode="status", status=401, error_type="authentication_error"),
            "auth",
            "ANTHROPIC_API_KEY",
        ),
        (
            Reply(mode="status", status=400, error_type="invalid_request_error"),
            "api",
            "API error 400",
        ),
    ],
)
@pytest.mark.asyncio
async def test_each_failure_becomes_one_provider_error_with_a_reason(
    fake_anthropic, reply, kind, words
):
    fake_anthropic.enqueue(reply)
    with pytest.raises(ProviderError) as caught:
        await collect(anthropic_provider(fake_anthropic))
    assert caught.value.kind == kind
    assert words in caught.value.reason


@pytest.mark.asyncio
async def test_an_unreachable_api_is_a_network_error():
    provider = AnthropicProvider(
        model=FAKE_MODEL, api_key="k", base_url="http://127.0.0.1:9", max_retries=0
    )
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.kind == "network"


@pytest.mark.asyncio
async def test_cancelling_the_consumer_closes_the_connection_the_server_sees(fake_anthropic):
    fake_anthropic.enqueue(Reply.held_tokens(1, 499))
    provider = anthropic_provider(fake_anthropic)
    first_token = asyncio.Event()

    async def consume():
        async for event in provider.stream(MESSAGES):
            if isinstance(event, TextDelta):
                first_token.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_token.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    assert fake_anthropic.completed == 0


@pytest.mark.asyncio
async def test_over_an_api_that_keeps_connections_alive_streams_reuse_one_and_a_stall_still_ends(
    fake_anthropic,
):
    fake_anthropic.keep_alive = True  # as the API does
    fake_anthropic.enqueue(
        Reply.text("First reply"), Reply.text("Second reply"), Reply.held(["Half an ", "answer"])
    )
    provider = AnthropicProvider(
        model=FAKE_MODEL, api_key="k", base_url=fake_anthropic.url, max_retries=0,
        stall_seconds=0.5,
    )  # fmt: skip
    texts = []
    for _ in range(2):
        events = await collect(provider)
        texts.append("".join(e.text for e in events if isinstance(e, TextDelta)))
    assert texts == ["First reply", "Second reply"]
    assert fake_anthropic.connections == 1  # the second went over the first one's connection
    with pytest.raises(ProviderError) as caught:  # the stall timeout holds on a reused one too
        await asyncio.wait_for(collect(provider), 5)
    assert caught.value.reason == "the model sent nothing for 0.5 s: timed out"
    assert (fake_anthropic.connections, len(fake_anthropic.requests)) == (1, 3)
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)  # and it hung up


def test_the_client_built_at_start_up_serves_the_first_stream_on_a_later_event_loop(
    fake_anthropic,
):
    provider = anthropic_provider(fake_anthropic)
    ahead = provider.build_client_ahead()  # no event loop runs yet, as at start-up
    fake_anthropic.enqueue(Reply.text("Built ahead"), Reply.text("On another loop"))

    async def first_stream():
        events = await collect(provider)
        return provider._client(), "".join(e.text for e in events if isinstance(e, TextDelta))

    client, text = asyncio.run(first_stream())
    assert text == "Built ahead"
    assert client is ahead
    later, text = asyncio.run(first_stream())  # a loop of its own gets a client of its own
    assert text == "On another loop"
    assert later is not client


def test_a_burst_of_first_streams_on_a_new_client_each_names_the_platform(fake_anthropic):
    """The SDK names the OS in each request's headers; the first requests of a new client look
    it up on a thread each (its own cache, which agentweb no longer fills from outside: a
    private name), and every one of them is answered."""
    provider = anthropic_provider(fake_anthropic)
    provider.build_client_ahead()
    fake_anthropic.enqueue(*[Reply.text(f"Reply {n}") for n in range(20)])

    async def burst():
        return await asyncio.gather(*[collect(provider) for _ in range(20)])

    replies = asyncio.run(burst())
    texts = sorted(
        "".join(e.text for e in events if isinstance(e, TextDelta)) for events in replies
    )
    assert texts == sorted(f"Reply {n}" for n in range(20))
    assert {r["headers"]["x-stainless-os"] for r in fake_anthropic.requests} == {"Linux"}


def test_the_default_model_is_offline_without_a_key(settings):
    settings.AGENTWEB_MODEL = "local"
    assert isinstance(provider_for("local"), LocalProvider)


@pytest.mark.asyncio
async def test_the_offline_model_streams_deterministically_in_many_tokens():
    first = await collect(LocalProvider(OfflineModel(), token_delay=0))
    second = await collect(LocalProvider(OfflineModel(), token_delay=0))
    assert first == second
    deltas = [e for e in first if isinstance(e, TextDelta)]
    assert len(deltas) > 10
    assert isinstance(first[-1], StreamEnd) and first[-1].usage.output > 0


def test_the_offline_model_writes_requested_sections_from_the_conversation():
    history = [
        {"role": "user", "content": "Build a parser for config/app.toml. It must not use regex."},
        {"role": "assistant", "content": "Started with parse_config() in src/parser.py."},
        {"role": "user", "content": "We decided to use tomllib instead."},
    ]
    request = {
        "role": "user",
        "content": "Write:\n## Goal\n## Key Decisions\n## Critical Context\n## Next Steps",
    }
    document = respond([*history, request])
    assert (
        document.index("## Goal")
        < document.index("## Key Decisions")
        < document.index("## Next Steps")
    )
    assert "Build a parser for config/app.toml" in document
    assert "decided to use tomllib" in document
    assert "src/parser.py" in document and "parse_config()" in document


@pytest.mark.asyncio
async def test_the_offline_model_reads_a_long_history_off_the_event_loop(settings):
    """Every tab's socket shares the event loop: the reply is written in a thread while the
    loop goes on."""
    from bench.make_session import generate
    from sessions import context
    from sessions.models import Entry
    from sessions.session_file.importing import _entry
    from sessions.session_file.reading import parse

    rows = list(parse(generate()))  # 2 MB
    entries = [_entry(None, line, None) for _, line in rows[1:]]  # type: ignore[arg-type]
    messages = context.build_context([e for e in entries if isinstance(e, Entry)])
    context.add_to_context(messages, "user", "## Goal\n## Next Steps\nWrite the document.")
    local = settings.AGENTWEB_MODELS["local"]
    settings.AGENTWEB_MODELS = {**settings.AGENTWEB_MODELS, "local": {**local, "window": 10**7}}
    loop = asyncio.get_running_loop()
    gaps: list[float] = []  # how long the loop went between the ticks of a 5 ms ticker
    streaming = True

    async def tick() -> None:
        last = loop.time()
        while streaming:
            await asyncio.sleep(0.005)
            gaps.append(loop.time() - last)
            last = loop.time()

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    # A full garbage collection stops every thread while it walks the heap, and the heap here
    # is the whole test run's (0.3 s in one CI run). Frozen, it is only this reply's garbage.
    gc.freeze()
    started = loop.time()
    try:
        reply = [
            event async for event in LocalProvider(OfflineModel(), token_delay=0).stream(messages)
        ]
    finally:
        took = loop.time() - started
        gc.unfreeze()
        streaming = False
        await ticker
    assert reply and isinstance(reply[-1], StreamEnd)
    # Read on the loop, the reply held it for all of its ~0.5 s; read in a thread, the loop
    # goes on ticking (a busy CI has paused it 0.25 s once, while the thread held the GIL).
    assert max(gaps) < max(0.4, took / 2), (max(gaps), took)
    assert len(gaps) > 10


class SpansStarted(trace.TracerProvider):
    """The process's tracer provider in a test: the name of each span started."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Tracer(self.names)


class _Tracer(trace.Tracer):
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        self.names.append(name)
        return trace.INVALID_SPAN

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:
        yield self.start_span(name)


@pytest.fixture
def spans(monkeypatch) -> list[str]:
    started = SpansStarted()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", started)
    return started.names


@pytest.mark.asyncio
async def test_a_request_starts_no_trace_span_unless_the_sdks_variable_asks(
    fake_anthropic, spans, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_OPEN_TELEMETRY", raising=False)
    fake_anthropic.enqueue(Reply.text("Hello there world"))
    await collect(anthropic_provider(fake_anthropic))
    assert spans == []


@pytest.mark.asyncio
async def test_with_anthropic_open_telemetry_set_each_request_is_a_span(
    fake_anthropic, spans, monkeypatch
):
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY", "true")
    fake_anthropic.enqueue(Reply.text("Hello there world"))
    events = await collect(anthropic_provider(fake_anthropic))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there world"
    assert spans == ["anthropic.messages.create"]
