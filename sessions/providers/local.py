"""The offline model: deterministic, no network, streams at a human-visible pace.

It cannot think, but it can make the app usable and `/handoff` meaningful
offline: when the last user message asks for a document with named markdown
sections, it writes those sections from the conversation's own content.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..context import estimate_tokens
from ..coverage import extract
from . import catalog
from .base import Provider, ProviderError, ProviderEvent, StreamEnd, TextDelta, Usage
from .catalog import LOCAL, ModelSpec

HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
TOKEN = re.compile(r"\s*\S+\s*|\s+")
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
FOCUS = re.compile(r"^Additional focus:\s*(.+)$", re.MULTILINE)
CONSTRAINT_WORDS = (
    "must",
    "should",
    "don't",
    "do not",
    "never",
    "always",
    "prefer",
    "avoid",
    "only",
)
DECISION_WORDS = (
    "decided",
    "decide",
    "we'll",
    "we will",
    "let's",
    "chose",
    "choose",
    "use ",
    "instead",
)


OFFLINE_NOTICE = (
    "*This is agentweb's offline model: it runs without a network and without an LLM, "
    "so it can only echo and summarise. Set `ANTHROPIC_API_KEY` to talk to Claude.*"
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
    ) -> AsyncIterator[ProviderEvent]:
        tokens = await self.count_tokens(messages, system=system)
        output = max_tokens or self.spec.max_output
        if tokens + output > self.spec.window:
            # As the API does: a request that cannot fit with its output is refused.
            raise ProviderError(
                f"the conversation is too long for {self.spec.label}'s context window (input "
                f"length and max_tokens exceed context limit: {tokens} + {output} "
                f"> {self.spec.window})",
                kind="too_long",
            )
        # Reading a long history takes a while: off the event loop, which serves every tab.
        reply = await asyncio.to_thread(respond, messages)
        reply = _at_most(reply, output)
        for token in TOKEN.findall(reply):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            else:
                await asyncio.sleep(0)
            yield TextDelta(token)
        yield StreamEnd(Usage(tokens, estimate_tokens(reply)), "end_turn")


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
    blocks = _texts(messages[-1])
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
        return write_document(sections, history, request)
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


def write_document(sections: list[str], history: list[dict[str, Any]], request: str) -> str:
    """A document with one `## <section>` per requested section, filled from the history."""
    user_texts = [_text(m) for m in history if m["role"] == "user"]
    assistant_texts = [_own_words(_text(m)) for m in history if m["role"] == "assistant"]
    all_sentences = [s for t in user_texts for s in _sentences(t)]
    focus = FOCUS.search(request)
    writers: dict[str, Callable[[], list[str]]] = {
        "goal": lambda: [_first_sentence(user_texts[0]) if user_texts else "Continue the work."],
        "constraint": lambda: _matching(all_sentences, CONSTRAINT_WORDS),
        "progress": lambda: [f"Discussed: {_first_sentence(t)}" for t in user_texts[-8:]],
        "decision": lambda: _matching(
            [s for t in user_texts + assistant_texts for s in _sentences(t)], DECISION_WORDS
        ),
        "context": lambda: [
            f"`{item.strip('`')}`"
            for item in concrete_items("\n".join(user_texts + assistant_texts))[:20]
        ],
        "next": lambda: (
            ([f"Focus: {focus.group(1).strip()}"] if focus else [])
            + [
                f"Pick up from the last request: {_first_sentence(user_texts[-1])}"
                if user_texts
                else ""
            ]
        ),
    }
    parts: list[str] = []
    for name in sections:
        key = next((k for k in writers if k in name.lower()), None)
        items = [item for item in (writers[key]() if key else []) if item.strip()]
        if not items:
            items = ["Nothing recorded in this session."]
        body = items[0] if key == "goal" and len(items) == 1 else "\n".join(f"- {i}" for i in items)
        parts.append(f"## {name}\n\n{body}")
    return "\n\n".join(parts)


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


def _text(message: dict[str, Any]) -> str:
    return "\n".join(_texts(message))


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content", "")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if len(s.strip()) > 3]


def _first_sentence(text: str) -> str:
    sentences = _sentences(text.replace("*", ""))
    first = sentences[0] if sentences else text.strip()
    return first[:300]


def _matching(sentences: list[str], words: tuple[str, ...]) -> list[str]:
    return _unique(s[:300] for s in sentences if any(w in s.lower() for w in words))[:8]


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(items))
