"""The offline model's provider: it streams what `sessions.offline` says, at a human-visible
pace, with the API's limits (a request that cannot fit its window is refused) and stop reasons.

What the model says comes in as an argument (`Responder`): this edge depends on nothing above
the provider protocol.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ..tokens import Usage, estimate_tokens, message_tokens
from . import catalog
from .base import Provider, ProviderError, ProviderEvent, StreamEnd, TextDelta, ToolCall
from .catalog import LOCAL, ModelSpec

TOKEN = re.compile(r"\s*\S+\s*|\s+")
IGNORES_THINKING = (
    "*The offline model does not think before it replies: it ignores the thinking level.*"
)


class Responder(Protocol):
    """What the offline model says to a request."""

    def reply(self, messages: list[dict[str, Any]]) -> str:
        """The whole reply to a conversation."""

    def tool_call(
        self, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> ToolCall | None:
        """The tool it calls after its reply, if any, among those offered."""

    def after_tools(self, results: list[dict[str, Any]]) -> str:
        """Its reply once the tool loop ran its calls (`results`: the tool_result blocks)."""


class LocalProvider(Provider):
    model = LOCAL
    calls_mcp_tools = False  # tools act on real things: they need Claude

    def __init__(
        self, responder: Responder, token_delay: float = 0.03, spec: ModelSpec | None = None
    ) -> None:
        self.responder = responder
        self.token_delay = token_delay
        self.spec = spec or catalog.spec(LOCAL)

    async def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> AsyncIterator[ProviderEvent]:
        # Counting and reading a long history takes a while: off the event loop, which every
        # tab's socket shares.
        tokens = await asyncio.to_thread(message_tokens, messages)
        tokens += estimate_tokens(system or "")
        output = max_tokens or self.spec.max_output
        if tokens + output > self.spec.window:
            # As the API does: a request that cannot fit with its output is refused.
            raise ProviderError.too_long(
                self.spec,
                "input length and max_tokens exceed context limit: "
                f"{tokens} + {output} > {self.spec.window}",
            )
        whole, reply, pieces, call = await asyncio.to_thread(
            self._write, messages, tools, output, thinking_budget
        )
        for token in pieces:
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            else:
                await asyncio.sleep(0)
            yield TextDelta(token)
        usage = Usage(input=tokens, output=estimate_tokens(reply))
        if reply != whole:  # as a model stops at its limit, before any call it meant to make
            yield StreamEnd(usage, "max_tokens")
            return
        if call is not None:
            yield call
        yield StreamEnd(usage, "tool_use" if call else "end_turn")

    def _write(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        output: int,
        thinking_budget: int,
    ) -> tuple[str, str, list[str], ToolCall | None]:
        """The whole reply, the reply cut at `output` tokens, its pieces to stream, and the tool
        it calls: read from the history, so in a thread (the reply to a long one, and the look
        a call takes at it, would hold the event loop)."""
        results = tool_results(messages[-1]) if messages else []
        call = None
        if results:  # the tool loop's next round: say what the tools did
            reply = self.responder.after_tools(results)
        else:
            reply = self.responder.reply(messages)
            call = self.responder.tool_call(messages, tools)
        if thinking_budget:
            reply = f"{IGNORES_THINKING}\n\n{reply}"
        cut = _at_most(reply, output)
        return reply, cut, TOKEN.findall(cut), call


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _at_most(reply: str, max_tokens: int) -> str:
    """The reply cut where it would pass `max_tokens`, as a model stops at its limit."""
    if estimate_tokens(reply) <= max_tokens:
        return reply
    return reply.encode()[: max_tokens * 3].decode(errors="ignore")
