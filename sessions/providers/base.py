"""The provider interface: a stream of text deltas ending with a StreamEnd, or a ProviderError."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tokens import Usage, estimate_tokens, message_tokens

if TYPE_CHECKING:
    from .catalog import ModelSpec


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """More of the model's thinking (or, with `signature`, the seal the API puts on it)."""

    text: str
    signature: str = ""


@dataclass(frozen=True)
class ToolCall:
    """The model calls a tool: its id, the tool's name, and its input (None when the input
    was not valid JSON; `raw` is what came)."""

    id: str
    name: str
    arguments: Any
    raw: str = ""


@dataclass(frozen=True)
class StreamEnd:
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"


ProviderEvent = TextDelta | ThinkingDelta | ToolCall | StreamEnd


async def replayed(text: str, usage: Usage) -> AsyncIterator[ProviderEvent]:
    """Text written ahead (a handoff draft), as a model's stream would give it: one delta, and
    its end."""
    yield TextDelta(text)
    yield StreamEnd(usage=usage, stop_reason="end_turn")


class ProviderError(Exception):
    """Any failure of a model call, with a reason a person can read.

    `kind` is one of: rate_limited, overloaded, network, auth, api, no_text, too_long,
    unavailable.
    """

    def __init__(self, reason: str, *, kind: str = "api") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind

    @classmethod
    def too_long(cls, spec: ModelSpec, detail: str) -> ProviderError:
        """The request does not fit the model's context window (a handoff splits on it)."""
        return cls(
            f"the conversation is too long for {spec.label}'s context window ({detail})",
            kind="too_long",
        )


class Provider(ABC):
    model: str
    spec: ModelSpec  # the model's window and maximum output
    calls_mcp_tools = True  # offered the operator's MCP tools (the offline model is not)
    caches_prompts = False  # a request that begins as an earlier one did is read from a cache

    @abstractmethod
    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AsyncIterator[ProviderEvent]:
        """Yield TextDelta (and ThinkingDelta, ToolCall) events, then exactly one StreamEnd;
        raise ProviderError on failure.

        `tools`: the tools the model may call (the Messages API's definitions); a reply that
        calls them ends with the stop reason `tool_use`, and the caller sends the results.
        `max_tokens` caps the output below the model's maximum (notes on a stretch).
        `thinking_budget` (tokens): think first, as Claude's extended thinking does.
        Cancelling the consuming task (or closing the iterator) must close the
        model connection. A request larger than the model's window fails with
        kind `too_long`, as the API refuses it.
        """

    async def count_tokens(
        self, messages: list[dict[str, Any]], *, system: str | None = None
    ) -> int:
        """The input tokens a request would cost, as the model counts them."""
        return message_tokens(messages) + estimate_tokens(system or "")
