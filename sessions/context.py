"""The session context: what the model is sent for a branch (the reference agent's
`buildSessionContext`, SPEC.md §5).

* The latest compaction on the branch comes first, as a user message holding its
  summary; then the kept entries, from its first kept entry up to it; then everything
  after it. Without a compaction, every entry goes in.
* `custom_message`, `branch_summary` and the user's own bash executions speak as the
  user; tool results do too, as the Messages API has them.
* Tool calls, tool results, bash executions and thinking travel as compact labelled text,
  in the form the reference agent uses when it serialises a conversation for its
  summariser: an imported session's tools are not agentweb's, and the agent's own
  `todo_write` calls go as structured `tool_use` blocks only within the tool loop of the
  reply that makes them. Images become a placeholder naming their type.

The context is built as `Part`s (one per block, labelled by what it is) so the handoff can
clip, leave out or summarise the right ones when the context is larger than the window;
`to_messages` merges them into the API's alternating user / assistant messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import attached, shapes
from .content import EntryLike, Kind, Role, Status, block_list, block_texts
from .tokens import estimate_tokens

LLMMessage = dict[str, Any]

USER = "user"
ASSISTANT = "assistant"

COMPACTION_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


@dataclass(frozen=True)
class Part:
    """One block of the context: who says it, its text, and what it is.

    kind: summary (a compaction's), text, thinking, tool_call, tool_result, bash,
    custom (a custom_message), branch_summary, notes (agentweb's own summary of a stretch).
    `kept` marks entries kept from before the latest compaction (the first to go when
    the context must shrink).
    """

    role: str
    text: str
    kind: str
    entry_id: int = 0
    kept: bool = False
    error: bool = False
    name: str = ""  # the tool's name, for tool calls and results
    call_id: str = ""  # the call a tool call part makes, or a tool result part answers
    attachment: dict[str, Any] | None = None  # an attached image or PDF: its stored block

    @property
    def tokens(self) -> int:
        if self.attachment is not None:
            return attached.tokens(self.attachment)
        return estimate_tokens(self.text)

    @property
    def labelled(self) -> str:
        """The part as the reference summariser's transcript shows it: `[User]: …`,
        `[Assistant]: …`; thinking, tool calls and tool results carry their own labels."""
        if self.kind in ("thinking", "tool_call", "tool_result"):
            return self.text
        return f"[{'User' if self.role == USER else 'Assistant'}]: {self.text}"

    def clipped(self, keep_chars: int) -> Part:
        return replace(self, text=excerpt(self.text, keep_chars))


# --- from entries to parts ---------------------------------------------------------------
def latest_compaction(entries: Sequence[EntryLike]) -> int | None:
    """The index of the branch's latest compaction, if it has one."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].kind == Kind.COMPACTION:
            return index
    return None


def first_kept(entries: Sequence[EntryLike], at: int) -> int:
    """The index of the first entry the compaction at `at` kept (`at` itself: none)."""
    kept_id = shapes.count(shapes.part(entries[at].data, "refs").get("firstKeptEntryId"))
    return next((i for i in range(at) if entries[i].pk == kept_id), at)


def context_parts(entries: Sequence[EntryLike]) -> list[Part]:
    """The branch's context as parts, in the order the model reads them; every tool call has a
    result (see `answered`)."""
    at = latest_compaction(entries)
    if at is None:
        return answered([part for entry in entries for part in entry_parts(entry)])
    compaction = entries[at]
    summary = shapes.text(shapes.part(compaction.data, "fields").get("summary")) or compaction.text
    parts = [
        Part(USER, f"{COMPACTION_PREFIX}{summary}{COMPACTION_SUFFIX}", "summary", compaction.pk)
    ]
    for entry in entries[first_kept(entries, at) : at]:
        parts += [replace(part, kept=True) for part in entry_parts(entry)]
    for entry in entries[at + 1 :]:
        parts += entry_parts(entry)
    return answered(parts)


NO_RESULT = "No result provided"


def answered(parts: Sequence[Part]) -> list[Part]:
    """The parts, with the reference agent's synthetic error result after each tool call that got
    none before the conversation went on (or before its end): no request tells the model of a
    call without saying it never ran."""
    shown: list[Part] = []
    pending: dict[str, Part] = {}  # the latest reply's calls that have no result yet
    for part in parts:
        if part.kind == "tool_result":
            pending.pop(part.call_id, None)
        elif pending and (
            part.role == USER or part.entry_id != next(iter(pending.values())).entry_id
        ):
            shown += _no_results(pending)
        if part.kind == "tool_call":
            pending[part.call_id] = part
        shown.append(part)
    return shown + _no_results(pending)


def _no_results(pending: dict[str, Part]) -> list[Part]:
    results = [
        Part(USER, f"[Tool result: {call.name}, error]: {NO_RESULT}", "tool_result",
             call.entry_id, kept=call.kept, error=True, name=call.name, call_id=call_id)
        for call_id, call in pending.items()
    ]  # fmt: skip
    pending.clear()
    return results


def in_context(entry: EntryLike) -> bool:
    """Whether an entry reaches the model at all. Not a reply that was cancelled or failed: the
    reference agent leaves those out (a fragment is not something the model said, and it may
    hold a tool call that never ran). Not a handoff's own exchange either: agentweb's request
    for a document, and the document, are about the conversation, not part of it, and a
    cancelled one must never reach a later request."""
    if entry.data.get("purpose") == "handoff":
        return False
    stopped = entry.status in (Status.ABORTED, Status.FAILED)
    return not (entry.kind == Kind.MESSAGE and entry.role == Role.ASSISTANT and stopped)


MENTIONED = "(Mentioned: session {} “{}”; the recall tool can look things up in it.)"


def entry_parts(entry: EntryLike) -> list[Part]:
    """What one entry contributes to the context (nothing, for most kinds that are not messages)."""
    if not in_context(entry):
        return []
    if entry.kind == Kind.CUSTOM_MESSAGE:
        return _blocks_as_parts(USER, entry.content, "custom", entry.pk)
    if entry.kind == Kind.BRANCH_SUMMARY:
        summary = shapes.text(shapes.part(entry.data, "fields").get("summary")) or entry.text
        if not summary:
            return []
        text = f"{BRANCH_SUMMARY_PREFIX}{summary}{BRANCH_SUMMARY_SUFFIX}"
        return [Part(USER, text, "branch_summary", entry.pk)]
    if entry.kind != Kind.MESSAGE:
        return []
    message = shapes.part(entry.data, "message")
    if entry.role == Role.ASSISTANT:
        return _assistant_parts(entry)
    if entry.role == Role.TOOL_RESULT:
        return _tool_result_parts(entry, message)
    if entry.role == "bashExecution":
        if message.get("excludeFromContext"):
            return []
        return [Part(USER, bash_text(message), "bash", entry.pk, error=bash_failed(message))]
    # user, and the reference agent's own user-side roles (custom, hookMessage): the files
    # attached first (as the API advises), then the words
    files = [block for block in block_list(entry.content) if attached.is_attached(block)]
    words = [b for b in block_list(entry.content) if not attached.is_attached(b)] if files else None
    parts = [_file_part(block, entry.pk) for block in files]
    parts += _blocks_as_parts(USER, entry.content if words is None else words, "text", entry.pk)
    for session_id, title in mentioned(entry):
        parts.append(Part(USER, MENTIONED.format(session_id, title), "text", entry.pk))
    return parts


def mentioned(entry: EntryLike) -> list[tuple[int, str]]:
    """The sessions a user message mentions, as it kept them: (id, title) each."""
    return mentions_in(entry.data)


def mentions_in(data: dict[str, Any]) -> list[tuple[int, str]]:
    """The mentions an entry's `data` keeps (those that name a session: a file may hold
    anything)."""
    listed = data.get("mentions")
    return [
        (number, shapes.text(mention.get("title")))
        for mention in (listed if isinstance(listed, list) else [])
        if isinstance(mention, dict) and (number := shapes.an_id(mention.get("session")))
    ]


def _assistant_parts(entry: EntryLike) -> list[Part]:
    parts: list[Part] = []
    for block in block_list(entry.content):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(Part(ASSISTANT, block["text"], "text", entry.pk))
        elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
            text = f"[Assistant thinking]: {block['thinking']}"
            parts.append(Part(ASSISTANT, text, "thinking", entry.pk))
        elif kind == "toolCall":
            name = str(block.get("name") or "tool")
            text = f"[Assistant tool call]: {tool_call_line(block)}"
            call_id = str(block.get("id") or f"{entry.pk}.{len(parts)}")
            parts.append(Part(ASSISTANT, text, "tool_call", entry.pk, name=name, call_id=call_id))
    return parts


CLIPPED = "\n[… {left:,} more characters of this result left out (the session keeps them)]"


def as_read(text: str, details: Any) -> str:
    """A tool's result as the model reads it: whole, unless its details say at how many
    characters it is clipped (an MCP tool's long result; the whole is kept in the entry)."""
    most = details.get("clipped") if isinstance(details, dict) else None
    if not isinstance(most, int) or isinstance(most, bool) or most < 0 or len(text) <= most:
        return text
    return text[:most] + CLIPPED.format(left=len(text) - most)


def _tool_result_parts(entry: EntryLike, message: dict[str, Any]) -> list[Part]:
    name = str(message.get("toolName") or "tool")
    error = bool(message.get("isError"))
    whole = "\n".join(block_texts(entry.content)) or "(no output)"
    body = as_read(whole, message.get("details"))
    label = f"[Tool result: {name}{', error' if error else ''}]"
    call_id = str(message.get("toolCallId") or "")
    text = f"{label}: {body}"
    return [Part(USER, text, "tool_result", entry.pk, error=error, name=name, call_id=call_id)]


def _file_part(block: dict[str, Any], entry_id: int) -> Part:
    """An attached file: its line and text (what a handoff or search reads); an image or PDF
    carries its block, which `to_messages` sends as the API's own."""
    kind = "file" if block.get("type") == "file" else "attachment"
    return Part(USER, attached.readable(block), kind, entry_id, attachment=block)


def _blocks_as_parts(role: str, content: Any, kind: str, entry_id: int) -> list[Part]:
    text = "\n".join(block_texts(content))
    return [Part(role, text, kind, entry_id)] if text.strip() else []


def tool_call_line(block: dict[str, Any]) -> str:
    """`name(key="value", …)`: a tool call on one line, as the reference summariser writes it."""
    arguments = block.get("arguments")
    if isinstance(arguments, dict):
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    elif arguments in (None, ""):
        shown = ""
    else:
        shown = json.dumps(arguments, ensure_ascii=False)
    return f"{block.get('name') or 'tool'}({shown})"


def bash_text(message: dict[str, Any]) -> str:
    """A bash execution as the reference agent puts it in the context."""
    command, output = str(message.get("command", "")), str(message.get("output", ""))
    text = f"Ran `{command}`\n" + (f"```\n{output}\n```" if output else "(no output)")
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif bash_failed(message):
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def bash_failed(message: dict[str, Any]) -> bool:
    """A bash execution that exited with a code other than 0."""
    exit_code = message.get("exitCode")
    return isinstance(exit_code, int) and exit_code != 0


# --- from parts to messages --------------------------------------------------------------
Files = Callable[[dict[str, Any]], list[dict[str, Any]]]


def to_messages(parts: Iterable[Part], files: Files | None = None) -> list[LLMMessage]:
    """The API's messages: consecutive parts of one role merged, empty ones left out. With
    `files` (`attachments.reader`), an attached image or PDF goes as the API's block after the
    line that names it; without, as that line and its text only (a handoff's notes)."""
    messages: list[LLMMessage] = []
    for part in parts:
        add_part(messages, part, files)
    return messages


def add_part(messages: list[LLMMessage], part: Part, files: Files | None) -> None:
    """Append one part as `to_messages` does."""
    if part.attachment is None or files is None or part.kind == "file":
        add_to_context(messages, part.role, part.text)
        return
    add_to_context(messages, part.role, attached.line(part.attachment))
    messages[-1]["content"].extend(files(part.attachment))


def add_to_context(messages: list[LLMMessage], role: str, text: str) -> None:
    """Append one text to an LLM message list the way `to_messages` does."""
    if not text.strip():
        return
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].append({"type": "text", "text": text})
    else:
        messages.append({"role": role, "content": [{"type": "text", "text": text}]})


def build_context(entries: Sequence[EntryLike], files: Files | None = None) -> list[LLMMessage]:
    """The LLM messages of a branch (its files' blocks read by `files`)."""
    return to_messages(context_parts(entries), files)


def serialize(parts: Iterable[Part]) -> str:
    """A stretch of conversation as one labelled transcript, for a model to take notes on."""
    return "\n\n".join(part.labelled for part in parts if part.text.strip())


def excerpt(text: str, keep_chars: int) -> str:
    """The head and the tail of a long text, with a note of how much was left out between."""
    if len(text) <= keep_chars:
        return text
    head = keep_chars * 2 // 3
    tail = keep_chars - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[… {left_out:,} characters clipped by agentweb …]\n{text[-tail:]}"


# --- how big the context is ----------------------------------------------------------------
def usage_tokens(entry: EntryLike) -> int:
    """The context size an assistant reply's usage reports (the reference agent's figure)."""
    usage = shapes.part(entry.data, "message").get("usage")
    if isinstance(usage, dict):
        total = usage.get("totalTokens")
        if isinstance(total, int) and total > 0:
            return total
        return sum(
            value
            for key in ("input", "output", "cacheRead", "cacheWrite")
            if isinstance(value := usage.get(key), int)
        )
    return entry.input_tokens + entry.output_tokens


def context_tokens(entries: Sequence[EntryLike]) -> int:
    """The reference agent's estimate: the last reply's reported usage, plus an estimate of
    what came after it. Without a usable reply after the latest compaction, all is estimated."""
    at = latest_compaction(entries)
    floor = at if at is not None else -1
    for index in range(len(entries) - 1, floor, -1):
        entry = entries[index]
        if (
            entry.kind == Kind.MESSAGE
            and entry.role == Role.ASSISTANT
            and in_context(entry)
            and (used := usage_tokens(entry))
        ):
            return used + sum(part.tokens for e in entries[index + 1 :] for part in entry_parts(e))
    return sum(part.tokens for part in context_parts(entries))
