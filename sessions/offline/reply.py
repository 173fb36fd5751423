"""What the offline model says: deterministic, extractive, no network.

It cannot think, but it makes the app usable and `/handoff` meaningful offline: when the last
user message asks for a document with named markdown sections, it writes those sections from
the conversation's own content (summariser.py); when a message writes out todo items, it keeps
the todo list with a `todo_write` call. `providers.local.LocalProvider` streams what it says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import checklists, todos
from ..content import block_texts
from ..items import extract
from ..providers import ToolCall
from . import recalling
from .reading import read
from .summariser import write_document

HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


OFFLINE_NOTICE = (
    "*This is agentweb's offline model: it runs without a network and without an LLM, "
    "so it can only echo and summarise. Set `ANTHROPIC_API_KEY` to talk to Claude.*"
)

TOOLS_NEED_CLAUDE = (
    "I cannot call tools: the MCP tools this server offers act on real things, and they need "
    "Claude. Set `ANTHROPIC_API_KEY` and choose a Claude model for this session."
)
ASKS_FOR_TOOLS = re.compile(r"\b(?:tools?|mcp\w*)\b", re.IGNORECASE)
CONCRETE_INTRO = "Concrete items I noticed:"
HANDOFF_TIP = "Type `/handoff` when this conversation gets long."


class OfflineModel:
    """The offline model's words, as `LocalProvider` asks for them."""

    def reply(self, messages: list[dict[str, Any]]) -> str:
        if messages and messages[-1]["role"] == "assistant":
            return go_on(messages[:-1], "\n".join(block_texts(messages[-1].get("content", ""))))
        return respond(messages)

    def tool_call(
        self, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> ToolCall | None:
        names = {tool.get("name") for tool in tools}
        if HANDOFF in names and (call := handoff_call(messages)):
            return call
        if recalling.RECALL in names and (call := recalling.recall_call(messages)):
            return call
        if todos.TOOL_NAME in names:
            return todo_call(messages)
        return None

    def after_tools(self, results: list[dict[str, Any]]) -> str:
        return after_tools(results)


def go_on(messages: list[dict[str, Any]], start: str) -> str:
    """The rest of a reply that stopped at the output limit, given as the start of the model's
    own turn (as the API continues a turn that ends the request): what the whole reply says
    after `start`, or nothing when it would not begin so."""
    whole = respond(messages)
    return whole[len(start) :] if whole.startswith(start) else ""


HANDOFF = "handoff"
WANTS_A_HANDOFF = re.compile(
    r"\b(?:hand(?:\s|-)?(?:it\s)?off|start(?:ing)? (?:over |again )?fresh|fresh session)\b",
    re.IGNORECASE,
)
FOCUS_ON = re.compile(r"\bfocus(?:ing)? on (.+?)(?:[.!?]|$)", re.IGNORECASE)


def handoff_call(messages: list[dict[str, Any]]) -> ToolCall | None:
    """A `handoff` call, when the user's last message asks for one in words ("hand off",
    "start fresh"; `/handoff` is the command, not a request to the model), with the focus
    it names ("… and focus on the tests")."""
    if not messages or messages[-1]["role"] != "user":
        return None
    typed = [text for text in block_texts(messages[-1].get("content", "")) if not _agentwebs(text)]
    said = typed[-1] if typed else ""
    if said.lstrip().startswith("/") or not WANTS_A_HANDOFF.search(said):
        return None
    focus = FOCUS_ON.search(said)
    arguments = {"focus": focus.group(1).strip() if focus else "", "reason": "The user asked."}
    return ToolCall(f"toolu_offline_handoff_{len(messages)}", HANDOFF, arguments)


def todo_call(messages: list[dict[str, Any]]) -> ToolCall | None:
    """When the last message writes out todo items (`todo: …` lines, a markdown checklist), a
    `todo_write` call with the list the conversation's user side has written so far: a handoff
    document's open work, the user's notes of their edits, their own items, in order, each item
    in the state it was last written with."""
    if not messages or messages[-1]["role"] != "user":
        return None
    typed = [text for text in block_texts(messages[-1].get("content", "")) if not _agentwebs(text)]
    if not checklists.from_text("\n".join(typed)):
        return None  # the user's own words name no item: the list stays as it is
    written: list[todos.Todo] = []
    for message in messages:
        if message["role"] != "user":
            continue
        for text in block_texts(message.get("content", "")):
            if "<handoff-context>" in text:
                written = checklists.merged(written, checklists.from_document(text))
            elif todos.is_note(text):  # the user's edit is the whole list, in their order
                written = checklists.from_text(text)
            elif not todos.is_reminder(text):
                written = checklists.merged(written, checklists.from_text(text))
    call_id = f"toolu_offline_{len(messages)}"
    return ToolCall(call_id, todos.TOOL_NAME, {"todos": todos.as_dicts(written)})


def _agentwebs(text: str) -> bool:
    return todos.is_note(text) or todos.is_reminder(text)


def after_tools(results: list[dict[str, Any]]) -> str:
    """The reply after the tool loop ran the calls: what each result said."""
    lines = []
    for result in results:
        text = result.get("content")
        text = text if isinstance(text, str) else "\n".join(block_texts(text or []))
        if result.get("is_error"):
            lines.append(f"The tool failed: {text}")
        else:
            lines.append(recalling.quoted(text) or text)
    return "\n\n".join(lines)


def respond(messages: list[dict[str, Any]]) -> str:
    """The whole reply to a conversation, deterministic.

    The request is the last text block (earlier blocks of the same message are context
    that was merged into it). A request that carries its own transcript in
    `<conversation>` tags (notes on a stretch of a long session) is read from that.
    """
    if not messages:
        return "Nothing to answer yet."
    blocks = list(block_texts(messages[-1].get("content", "")))
    files = [block for block in blocks if ATTACHED.match(block)]
    said = [block for block in blocks if block not in files and not block.startswith("<file ")]
    request = said[-1] if said else ""
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
    return _chat_reply(request, len(messages), [m[1] for f in files if (m := ATTACHED.match(f))])


ATTACHED = re.compile(r"\[Attached (?:image|PDF|file): (.+)\]")
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


def _chat_reply(request: str, turn: int, files: Sequence[str] = ()) -> str:
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
    if files:  # it cannot look inside them; it says what it was given
        lines += ["", f"You attached {len(files)} file{'s' if len(files) != 1 else ''}:", ""]
        lines += [f"- {file}" for file in files]
    if ASKS_FOR_TOOLS.search(request):
        lines += ["", TOOLS_NEED_CLAUDE]
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
