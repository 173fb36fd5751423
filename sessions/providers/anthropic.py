"""Claude through the official SDK's streaming Messages API."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any, cast

import anthropic
import httpx2

from ..tokens import Usage
from . import catalog
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


class AnthropicProvider(Provider):
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
            # The raw event stream, not `messages.stream()`: that helper rebuilds a snapshot
            # of the whole message and a second event for every delta, which costs a third
            # of the SDK's time per event. Only text, usage and the stop reason are needed.
            events = await client.messages.create(**request, stream=True)
            async with events:
                async for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        if event.delta.text:  # the one event of most of a reply: read here
                            yield TextDelta(event.delta.text)
                    elif (taken := reading.take(event)) is not None:
                        yield taken
                if not reading.stopped:
                    raise ProviderError(
                        "network connection lost: the stream ended before the reply did",
                        kind="network",
                    )
        except anthropic.AnthropicError as error:
            raise _failure(error, self.spec, self.stall_seconds) from error
        except httpx2.TransportError as error:  # a dropped body is not the SDK's own error
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


class _Reading:
    """What a stream's events other than text say: thinking, tool calls, usage, the stop."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False  # message_stop came: the reply is whole
        self.calls: dict[int, tuple[str, str, list[str]]] = {}  # tool_use blocks: id, name, JSON

    def take(self, event: Any) -> ProviderEvent | None:
        """The provider event this stream event makes, if any."""
        kind = event.type
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_start" and event.content_block.type == "tool_use":
            self.calls[event.index] = (event.content_block.id, event.content_block.name, [])
        elif kind == "content_block_stop" and event.index in self.calls:
            return _tool_call(*self.calls.pop(event.index))
        elif kind == "message_start":
            usage = event.message.usage
            self.usage = Usage(
                input=usage.input_tokens,
                output=usage.output_tokens,
                cache_read=usage.cache_read_input_tokens or 0,
                cache_write=usage.cache_creation_input_tokens or 0,
            )
        elif kind == "message_delta":
            used = event.usage
            self.usage = replace(
                self.usage, input=used.input_tokens or self.usage.input, output=used.output_tokens
            )
            self.stop_reason = event.delta.stop_reason or self.stop_reason
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(self, index: int, delta: Any) -> ProviderEvent | None:
        if delta.type == "thinking_delta" and delta.thinking:
            return ThinkingDelta(delta.thinking)
        if delta.type == "signature_delta":
            return ThinkingDelta("", signature=delta.signature)
        if delta.type == "input_json_delta" and index in self.calls:
            self.calls[index][2].append(delta.partial_json)
        return None


def _failure(error: Exception, spec: ModelSpec, stall_seconds: float) -> ProviderError:
    """The SDK's (or its HTTP client's) error, named as a person reads it."""
    if isinstance(error, anthropic.APIStatusError):
        return _status_error(error, spec)
    if isinstance(error, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(
            f"the model sent nothing for {stall_seconds:g} s: timed out", kind="timeout"
        )
    if isinstance(error, anthropic.APIConnectionError | httpx2.TransportError):
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


def shared_client(**options: Any) -> anthropic.AsyncAnthropic:
    loop = asyncio.get_running_loop()
    clients = _clients.setdefault(loop, {})
    key = tuple(sorted((name, repr(value)) for name, value in options.items()))
    if key not in clients:
        # aiohttp reads a stream in about two thirds of httpx's time per event (bench/).
        clients[key] = anthropic.AsyncAnthropic(
            **options, http_client=anthropic.DefaultAioHttpClient()
        )
    return clients[key]


_REASONS_BY_TYPE = {
    "rate_limit_error": ("rate limited by the API, try again shortly", "rate_limited"),
    "overloaded_error": ("the model is overloaded, try again shortly", "overloaded"),
    "authentication_error": ("authentication failed: check ANTHROPIC_API_KEY", "auth"),
    "permission_error": ("permission denied by the API", "auth"),
}


TOO_LONG = ("prompt is too long", "exceed context limit")


def _status_error(error: anthropic.APIStatusError, spec: ModelSpec) -> ProviderError:
    """Name the real cause: an HTTP status, or the `error` event inside a 200 stream."""
    detail = error.api_message or str(error)
    if error.status_code == 400 and any(words in detail for words in TOO_LONG):
        return ProviderError.too_long(spec, detail)
    error_type = error.type or {
        429: "rate_limit_error",
        529: "overloaded_error",
        401: "authentication_error",
    }.get(error.status_code, "")
    reason, kind = _REASONS_BY_TYPE.get(error_type, (None, "api"))
    if reason is None:
        status = f" {error.status_code}" if error.status_code != 200 else ""
        reason = f"API error{status}: {detail}"
    elif error.status_code != 200:
        reason = f"{reason} ({error.status_code})"
    return ProviderError(reason, kind=kind)
