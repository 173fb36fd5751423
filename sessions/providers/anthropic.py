"""Claude through the official SDK's streaming Messages API."""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, cast

import aiohttp
import anthropic
import httpx2

from ..tokens import Usage
from . import catalog, sse
from .base import (
    Provider,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
)
from .catalog import ModelSpec

CACHE = {"type": "ephemeral"}  # the default five minutes: a session's turns come closer


class AnthropicProvider(Provider):
    caches_prompts = True

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        max_tokens: int = 8192,
        max_retries: int = 2,
        spec: ModelSpec | None = None,
        stall_seconds: float = 120.0,
    ) -> None:
        self.model = model
        self.spec = spec or catalog.spec(model)
        self.max_tokens = max_tokens
        self.stall_seconds = stall_seconds
        self.client_options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "max_retries": max_retries,
            # A stream that sends nothing (not even the API's pings) this long has stalled.
            "timeout": anthropic.Timeout(stall_seconds, connect=min(10.0, stall_seconds)),
        }

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AsyncIterator[ProviderEvent]:
        request = self._request(messages, system, max_tokens, thinking_budget, tools)
        client = self._client()
        reading = _Reading()
        try:
            # The SDK sends the request (headers, retries, an HTTP error named as the API
            # names it) and agentweb reads the event stream's JSON: the SDK's typed events cost
            # half its time per event, and `messages.stream()` rebuilds the whole message at
            # every delta on top. Only text, thinking, tool calls, usage and the stop are kept.
            create = client.messages.with_streaming_response.create
            async with create(**request, stream=True) as response:
                async for name, data in sse.events(response.iter_bytes()):
                    if (taken := reading.read(name, data, self.spec)) is not None:
                        yield taken
                if not reading.stopped:
                    raise ProviderError(
                        "network connection lost: the stream ended before the reply did",
                        kind="network",
                    )
        except anthropic.AnthropicError as error:
            raise _failure(error, self.spec, self.stall_seconds) from error
        except (httpx2.TransportError, aiohttp.ClientError) as error:  # a body's, not the SDK's
            raise _failure(error, self.spec, self.stall_seconds) from error
        yield StreamEnd(reading.usage, reading.stop_reason or "end_turn")

    def _request(
        self,
        messages: list[dict[str, Any]],
        system: str | None,
        max_tokens: int | None,
        thinking_budget: int,
        tools: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        """The Messages API request's arguments, stream aside."""
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens or self.max_tokens,
            "messages": cast(Any, messages),
            # The API's automatic prompt caching: it marks the request's last block, so the
            # next turn (and a handoff draft, which sends the same tools, system and turns
            # first) reads everything before it from the cache, at a tenth of the price.
            "cache_control": CACHE,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = list(tools)
        if thinking_budget:  # the budget is part of max_tokens, which must exceed it
            request["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
            request["max_tokens"] += thinking_budget
        return request

    async def count_tokens(
        self, messages: list[dict[str, Any]], *, system: str | None = None
    ) -> int:
        """The API's own count (`/v1/messages/count_tokens`): exact, and free."""
        extra: dict[str, Any] = {"system": system} if system else {}
        client = self._client()
        try:
            counted = await client.messages.count_tokens(
                model=self.model, messages=cast(Any, messages), **extra
            )
        except anthropic.AnthropicError as error:
            raise _failure(error, self.spec, self.stall_seconds) from error
        except httpx2.TransportError as error:
            raise _failure(error, self.spec, self.stall_seconds) from error
        return counted.input_tokens

    def _client(self) -> anthropic.AsyncAnthropic:
        """The process's client for these options (one per event loop).

        Building one costs about 20 ms of blocked event loop (its SSL context), so generations
        share it, and its pool keeps connections to the API alive between them. A stream left
        early (a cancel) closes its own connection, unread responses are never reused.
        """
        if not self.client_options["api_key"]:
            raise ProviderError(catalog.unavailable_reason(self.model), kind="auth")
        return shared_client(**self.client_options)

    def build_client_ahead(self) -> anthropic.AsyncAnthropic:
        """At start-up: the client the first generation will take, built now."""
        return build_client_ahead(**self.client_options)


class _Reading:
    """What a stream's events other than text say: thinking, tool calls, usage, the stop."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False  # message_stop came: the reply is whole
        self.calls: dict[int, tuple[str, str, list[str]]] = {}  # tool_use blocks: id, name, JSON

    def read(self, name: str, data: str, spec: ModelSpec) -> ProviderEvent | None:
        """The provider event one server-sent event (its name, its JSON) makes, if any; an
        `error` event, or one that is not the API's JSON, raises a ProviderError."""
        try:
            event = json.loads(data)
            if name == "content_block_delta" and event["delta"]["type"] == "text_delta":
                text = event["delta"]["text"]  # most of a reply's events: read first
                return TextDelta(text) if text else None
            if name == "error":
                raise _error_event(event, spec)
            return self._take(name, event)
        except (ValueError, LookupError, TypeError) as error:  # not the API's JSON, or shape
            raise ProviderError(
                f"the API sent an event agentweb cannot read ({error!r})"
            ) from error

    def _take(self, name: str, event: dict[str, Any]) -> ProviderEvent | None:
        if name == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        if name == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            self.calls[event["index"]] = (block["id"], block["name"], [])
        elif name == "content_block_stop" and event["index"] in self.calls:
            return _tool_call(*self.calls.pop(event["index"]))
        elif name == "message_start":
            usage = event["message"]["usage"]
            self.usage = Usage(
                input=usage.get("input_tokens") or 0,
                output=usage.get("output_tokens") or 0,
                cache_read=usage.get("cache_read_input_tokens") or 0,
                cache_write=usage.get("cache_creation_input_tokens") or 0,
            )
        elif name == "message_delta":
            used = event.get("usage") or {}
            self.usage = replace(
                self.usage,
                input=used.get("input_tokens") or self.usage.input,
                output=used.get("output_tokens") or self.usage.output,
            )
            self.stop_reason = event["delta"].get("stop_reason") or self.stop_reason
        elif name == "message_stop":
            self.stopped = True
        return None  # ping, and events a later API adds

    def _delta(self, index: int, delta: dict[str, Any]) -> ProviderEvent | None:
        kind = delta["type"]
        if kind == "thinking_delta" and delta["thinking"]:
            return ThinkingDelta(delta["thinking"])
        if kind == "signature_delta":
            return ThinkingDelta("", signature=delta["signature"])
        if kind == "input_json_delta" and index in self.calls:
            self.calls[index][2].append(delta["partial_json"])
        return None


def _failure(error: Exception, spec: ModelSpec, stall_seconds: float) -> ProviderError:
    """The SDK's (or its HTTP client's) error, named as a person reads it."""
    if isinstance(error, anthropic.APIStatusError):
        return _status_error(error, spec)
    timeouts = anthropic.APITimeoutError | httpx2.TimeoutException | aiohttp.ServerTimeoutError
    if isinstance(error, timeouts):
        return ProviderError(
            f"the model sent nothing for {stall_seconds:g} s: timed out", kind="timeout"
        )
    lost = anthropic.APIConnectionError | httpx2.TransportError | aiohttp.ClientError
    if isinstance(error, lost):
        return ProviderError(f"network connection lost ({error})", kind="network")
    return ProviderError(str(error) or type(error).__name__, kind="api")


def _tool_call(call_id: str, name: str, parts: list[str]) -> ToolCall:
    raw = "".join(parts)
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        arguments = None  # the caller answers with an error result the model can correct
    return ToolCall(call_id, name, arguments, raw)


_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[Any, ...], anthropic.AsyncAnthropic]
] = weakref.WeakKeyDictionary()
# Clients built before any event loop ran (at start-up): each goes to the first loop that asks
# for its options. A client binds to a loop only at its first request (aiohttp's session).
_unbound: dict[tuple[Any, ...], anthropic.AsyncAnthropic] = {}


def _key(options: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((name, repr(value)) for name, value in options.items()))


def _built(options: dict[str, Any]) -> anthropic.AsyncAnthropic:
    # aiohttp reads a stream in about two thirds of httpx's time per event (bench/).
    return anthropic.AsyncAnthropic(**options, http_client=anthropic.DefaultAioHttpClient())


def traced() -> dict[str, Any]:
    """The SDK's OpenTelemetry span of each request, off unless ANTHROPIC_OPEN_TELEMETRY is set
    (then the SDK does as it says): agentweb sets up no tracer to record them, and the SDK
    builds each span's attributes whether or not one does, about a fifth of a request's CPU
    (bench/read_paths.py)."""
    return {} if "ANTHROPIC_OPEN_TELEMETRY" in os.environ else {"open_telemetry": False}


def shared_client(**options: Any) -> anthropic.AsyncAnthropic:
    loop = asyncio.get_running_loop()
    clients = _clients.setdefault(loop, {})
    options = {**options, **traced()}
    key = _key(options)
    if key not in clients:
        ahead = _unbound.pop(key, None)
        clients[key] = ahead if ahead is not None else _built(options)
    return clients[key]


def build_client_ahead(**options: Any) -> anthropic.AsyncAnthropic:
    """Build the client for these options now, outside any event loop (its SSL context and
    the transport's imports cost about 40 ms): the first loop that asks for it takes it."""
    options = {**options, **traced()}
    key = _key(options)
    if key not in _unbound:
        _unbound[key] = _built(options)
    return _unbound[key]


_REASONS_BY_TYPE = {
    "rate_limit_error": ("rate limited by the API, try again shortly", "rate_limited"),
    "overloaded_error": ("the model is overloaded, try again shortly", "overloaded"),
    "authentication_error": ("authentication failed: check ANTHROPIC_API_KEY", "auth"),
    "permission_error": ("permission denied by the API", "auth"),
}


TOO_LONG = ("prompt is too long", "exceed context limit")


def _status_error(error: anthropic.APIStatusError, spec: ModelSpec) -> ProviderError:
    """An HTTP error status, named as the API names it."""
    return _api_error(error.status_code, error.type, error.api_message or str(error), spec)


def _error_event(event: dict[str, Any], spec: ModelSpec) -> ProviderError:
    """The `error` event inside a 200 stream (an overload mid-reply, say)."""
    error = event.get("error") or {}
    detail = str(error.get("message") or event)
    return _api_error(200, str(error.get("type") or ""), detail, spec)


def _api_error(
    status_code: int, error_type: str | None, detail: str, spec: ModelSpec
) -> ProviderError:
    """Name the real cause: an HTTP status, or the error the stream carried."""
    if status_code == 400 and any(words in detail for words in TOO_LONG):
        return ProviderError.too_long(spec, detail)
    error_type = error_type or {
        429: "rate_limit_error",
        529: "overloaded_error",
        401: "authentication_error",
    }.get(status_code, "")
    reason, kind = _REASONS_BY_TYPE.get(error_type, (None, "api"))
    if reason is None:
        status = f" {status_code}" if status_code != 200 else ""
        reason = f"API error{status}: {detail}"
    elif status_code != 200:
        reason = f"{reason} ({status_code})"
    return ProviderError(reason, kind=kind)
