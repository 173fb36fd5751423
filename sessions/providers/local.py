"""The offline model: deterministic, no network, streams at a human-visible pace.

It cannot think, but it can make the app usable and `/handoff` meaningful
offline: when the last user message asks for a document with named markdown
sections, it writes those sections from the conversation's own content
(summariser.py).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .. import todos
from ..context import block_texts, estimate_tokens, message_tokens
from ..coverage import extract
from . import catalog
from .base import Provider, ProviderError, ProviderEvent, StreamEnd, TextDelta, ToolCall, Usage
from .catalog import LOCAL, ModelSpec
from .summariser import read, write_document

HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
TOKEN = re.compile(r"\s*\S+\s*|\s+")


OFFLINE_NOTICE = (
    "*This is agentweb's offline model: it runs without a network and without an LLM, "
    "so it can only echo and summarise. Set `ANTHROPIC_API_KEY` to talk to Claude.*"
)

IGNORES_THINKING = (
    "*The offline model does not think before it replies: it ignores the thinking level.*"
)
CONCRETE_INTRO = "Concrete items I noticed:"
HANDOFF_TIP = "Type `/handoff` when this conversation gets long."


class LocalProvider(Provider):
    model = LOCAL

    def __init__(self, token_delay: float = 0.03, spec: ModelSpec | None = None) -> None:
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
        results = tool_results(messages[-1]) if messages else []
        call = None
        if results:  # the tool loop's next round: say what the tools did
            reply = after_tools(results)
        else:
            reply = await asyncio.to_thread(respond, messages)
            if any(tool.get("name") == todos.TOOL_NAME for tool in tools):
                call = todo_call(messages)
        if thinking_budget:
            reply = f"{IGNORES_THINKING}\n\n{reply}"
        reply = _at_most(reply, output)
        for token in TOKEN.findall(reply):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            else:
                await asyncio.sleep(0)
            yield TextDelta(token)
        if call is not None:
            yield call
        yield StreamEnd(Usage(tokens, estimate_tokens(reply)), "tool_use" if call else "end_turn")


def todo_call(messages: list[dict[str, Any]]) -> ToolCall | None:
    """When the last message writes out todo items (`todo: …` lines, a markdown checklist), a
    `todo_write` call with the list the conversation's user side has written so far: a handoff
    document's open work, the user's notes of their edits, their own items, in order, each item
    in the state it was last written with."""
    if not messages or messages[-1]["role"] != "user":
        return None
    if not todos.from_text("\n".join(block_texts(messages[-1].get("content", "")))):
        return None
    written: list[todos.Todo] = []
    for message in messages:
        if message["role"] != "user":
            continue
        for text in block_texts(message.get("content", "")):
            if "<handoff-context>" in text:
                written = todos.merged(written, todos.from_document(text))
            else:
                written = todos.merged(written, todos.from_text(text))
    call_id = f"toolu_offline_{len(messages)}"
    return ToolCall(call_id, todos.TOOL_NAME, {"todos": todos.as_dicts(written)})


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def after_tools(results: list[dict[str, Any]]) -> str:
    """The reply after the tool loop ran the calls: what each result said."""
    lines = []
    for result in results:
        text = result.get("content")
        text = text if isinstance(text, str) else "\n".join(block_texts(text or []))
        lines.append(f"The tool failed: {text}" if result.get("is_error") else text)
    return "\n\n".join(lines)


def _at_most(reply: str, max_tokens: int) -> str:
    """The reply cut where it would pass `max_tokens`, as a model stops at its limit."""
    if estimate_tokens(reply) <= max_tokens:
        return reply
    return reply.encode()[: max_tokens * 3].decode(errors="ignore")


def respond(messages: list[dict[str, Any]]) -> str:
    """The whole reply to a conversation, deterministic.

    The request is the last text block (earlier blocks of the same message are context
    that was merged into it). A request that carries its own transcript in
    `<conversation>` tags (notes on a stretch of a long session) is read from that.
    """
    if not messages:
        return "Nothing to answer yet."
    blocks = list(block_texts(messages[-1].get("content", "")))
    request = blocks[-1] if blocks else ""
    history = messages[:-1]
    if len(blocks) > 1:
        merged = [{"type": "text", "text": text} for text in blocks[:-1]]
        history = [*history, {"role": messages[-1]["role"], "content": merged}]
    transcript = CONVERSATION.match(request)
    if transcript:
        history = parse_transcript(transcript.group(1))
        request = request[transcript.end() :]
    sections = HEADING.findall(request)
    if len(sections) >= 2:
        return write_document(sections, read(history, _own_words), request)
    return _chat_reply(request, len(messages))


CONVERSATION = re.compile(r"\s*<conversation>\n(.*)\n</conversation>", re.DOTALL)
LABEL = re.compile(
    r"\n\n(?=\[(?:User|Assistant|Assistant thinking|Assistant tool call|Tool result[^\]\n]*)\]: )"
)


def parse_transcript(transcript: str) -> list[dict[str, Any]]:
    """A labelled transcript (`[User]: …`, `[Tool result: read]: …`) back into messages."""
    messages: list[dict[str, Any]] = []
    for piece in LABEL.split(transcript):
        role = "assistant" if piece.startswith("[Assistant") else "user"
        text = (
            piece.split("]: ", 1)[1] if piece.startswith(("[User]: ", "[Assistant]: ")) else piece
        )
        messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    return messages


def _chat_reply(request: str, turn: int) -> str:
    words = request.split()
    found = concrete_items(request)
    lines = [
        OFFLINE_NOTICE,
        "",
        f"You wrote {len(words)} word{'s' if len(words) != 1 else ''} (message {turn // 2 + 1} "
        "of this session). Here is what I will remember of it:",
        "",
        f"> {' '.join(words[:60])}{' …' if len(words) > 60 else ''}",
    ]
    if found:
        lines += ["", "Concrete items I noticed:", ""] + [
            f"- `{item.strip('`')}`" for item in found[:8]
        ]
    lines += ["", "Type `/handoff` when this conversation gets long."]
    return "\n".join(lines)


def concrete_items(text: str) -> list[str]:
    """Paths, identifiers, errors, URLs and numbers: what the coverage panel looks for too."""
    return [item for kind, item in extract([text]) if kind != "decision"]


def _own_words(reply: str) -> str:
    """An assistant reply without what this model adds to every reply (its notice, its quotes)."""
    boilerplate = {OFFLINE_NOTICE, HANDOFF_TIP, CONCRETE_INTRO}
    return "\n".join(
        line
        for line in reply.splitlines()
        if line.strip() not in boilerplate
        and not line.startswith(">")
        and not line.startswith("You wrote ")
    )
