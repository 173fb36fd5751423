"""What the page shows of a branch: tool work folded, thinking folded, markers for the rest.

A tool call is one line (its name and arguments) with its result folded under it;
errors are marked. The result's own entry is then not shown a second time. A user's
bash execution is one line with its output folded; thinking is folded; images are a
placeholder naming their type (their bytes stay in the database and the export).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from . import attached, todos
from .content import IMAGE_TYPES, block_texts, image_placeholder
from .context import bash_failed, bash_text, tool_call_line
from .models import Entry
from .shapes import an_id, part
from .store import Outline

BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")

SHOWN_RESULT_CHARS = 20_000  # a longer tool output is cut in the page (the export has it all)

Block = dict[str, Any]


def call_ids(entry: Entry | None) -> list[str]:
    """The ids of the tools an assistant message called (none for any other entry): its reply
    goes on after their results."""
    if entry is None or entry.kind != Entry.Kind.MESSAGE or entry.role != Entry.Role.ASSISTANT:
        return []
    blocks = entry.content if isinstance(entry.content, list) else []
    calls = [b for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]
    return [str(block.get("id")) for block in calls]


def join(previous: Entry | None, entry: Entry) -> Entry:
    """Mark `entry` as a later round of the reply `previous` began, when it is one: an assistant
    message right after (tool results aside) one that called tools. One reply, one card."""
    is_reply = entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.ASSISTANT
    goes_on = previous is not None and entry.data.get("continues") == previous.pk  # Continue
    if is_reply and (call_ids(previous) or goes_on) and _purpose(previous) == _purpose(entry):
        assert previous is not None
        entry.reply_start = previous.reply_start or previous.pk
        previous.goes_on = True
    return entry


def _purpose(entry: Entry | None) -> object:
    return entry.purpose if entry is not None else None


def fold(entries: Sequence[Entry]) -> list[Entry]:
    """The entries to show: each tool result moves under the call it answers, and each later
    tool round of a reply is marked as part of the card its first round opened."""
    calls: dict[str, Entry] = {}
    shown: list[Entry] = []
    for entry in entries:
        if entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.ASSISTANT:
            calls.update(dict.fromkeys(call_ids(entry), entry))
        elif entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.TOOL_RESULT:
            call_id = str(part(entry.data, "message").get("toolCallId"))
            caller = calls.get(call_id)
            if caller is not None:
                if caller.folded_results is None:
                    caller.folded_results = {}
                caller.folded_results[call_id] = entry
                continue
        shown.append(join(shown[-1] if shown else None, entry))
    return shown


def blocks(entry: Entry) -> list[Block]:
    """An entry's content as the page shows it, block by block."""
    if entry.kind != Entry.Kind.MESSAGE:
        return []
    message = part(entry.data, "message")
    if entry.role == Entry.Role.TOOL_RESULT:
        return [_result_block(entry, str(message.get("toolName") or "tool"), line="")]
    if entry.role == "bashExecution":
        return [_bash_block(message)]
    shown: list[Block] = []
    for index, block in enumerate(entry.content or []):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            shown.append({"kind": "text", "text": block["text"]})
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            shown.append({"kind": "thinking", "text": block["thinking"]})
        elif kind == "toolCall":
            shown.append(_call_block(entry, block, index))
        elif attached.is_attached(block):  # a file of agentweb's: the image, or a chip
            shown.append({**block, "kind": "attachment"})
        elif kind == "image":
            shown.append({"kind": "image", "text": image_placeholder(block)})
    return shown


def _call_block(entry: Entry, block: Block, index: int) -> Block:
    """A tool call's line, with its result folded under it once there is one; `index` (its
    place in the reply) names it in the page, so its result alone can be shown when it comes."""
    result = (entry.folded_results or {}).get(str(block.get("id")))
    name = str(block.get("name") or "tool")
    if result is None:
        return {"kind": "tool", "line": _call_line(block), "name": name, "index": index}
    return {**_result_block(result, name, line=_call_line(block)), "index": index}


def answered_call(caller: Entry, call_id: str) -> Block | None:
    """The call of `caller` that `call_id` names, as the page shows it now."""
    for index, block in enumerate(caller.content or []):
        is_call = isinstance(block, dict) and block.get("type") == "toolCall"
        if is_call and str(block.get("id")) == call_id:
            return _call_block(caller, block, index)
    return None


def _call_line(block: Block) -> str:
    """A tool call on one line; the agent's own todo_write as what it set (the list is in the
    panel, and in full under the line)."""
    if block.get("name") == todos.TOOL_NAME and isinstance(block.get("arguments"), dict):
        todo_list = todos.from_dicts(block["arguments"].get("todos"))
        if todo_list or block["arguments"].get("todos") == []:
            return f"{todos.TOOL_NAME}: {todos.summary(todo_list).removesuffix('.')}"
    return tool_call_line(block)


def _result_block(result: Entry, name: str, *, line: str) -> Block:
    text = "\n".join(block_texts(result.content))
    return {
        "recalled": _recalled(result),
        "recalled_everywhere": part(result.data, "message", "details", "recall").get("everywhere")
        is True,
        "kind": "tool",
        "line": line or f"{name} result",
        "name": name,
        "has_result": True,
        "result": text[:SHOWN_RESULT_CHARS],
        "cut": max(0, len(text) - SHOWN_RESULT_CHARS),
        "error": part(result.data, "message").get("isError") is True,
        "images": _images(result),
    }


def _images(result: Entry) -> list[str]:
    """A tool result's images, as data URLs the card shows (only the kinds Claude reads)."""
    return [
        f"data:{block['mimeType']};base64,{block['data']}"
        for block in result.content or []
        if isinstance(block, dict)
        and block.get("type") == "image"
        and block.get("mimeType") in IMAGE_TYPES
        and isinstance(block.get("data"), str)
        and BASE64.fullmatch(block["data"])
    ]


def _recalled(result: Entry) -> list[Block]:
    """The entries a recall found, as its details keep them (only those that name a session
    and an entry: a file may hold anything)."""
    hits = part(result.data, "message", "details", "recall").get("entries")
    return [
        {**hit, "revised_by": an_id(hit.get("revised_by"))}
        for hit in (hits if isinstance(hits, list) else [])
        if isinstance(hit, dict) and an_id(hit.get("session")) and an_id(hit.get("entry"))
    ]


def _bash_block(message: dict[str, Any]) -> Block:
    exit_code = message.get("exitCode")
    output = str(message.get("output", ""))
    return {
        "kind": "bash",
        "line": f"$ {message.get('command', '')}",
        "result": output[:SHOWN_RESULT_CHARS],
        "cut": max(0, len(output) - SHOWN_RESULT_CHARS),
        "error": bash_failed(message),
        "exit_code": exit_code,
        "excluded": bool(message.get("excludeFromContext")),
        "context_text": bash_text(message),
    }


WINDOW = 200  # entries rendered at once; earlier ones load on demand


def window(outline: Outline, before: int | None = None, size: int = WINDOW) -> dict[str, Any]:
    """The last `size` entries before entry `before` (or the end), and how many precede them:
    only those entries are loaded, whatever the session's size. Each knows its siblings."""
    end = next((i for i, (pk, _) in enumerate(outline) if pk == before), len(outline))
    roles = [role for _, role in outline]
    start = start_of_window(roles, max(0, end - size))
    shown = with_siblings(Entry.in_order([pk for pk, _ in outline[start:end]]), outline)
    return {
        "entries": fold(shown),
        "earlier": start,
        "earlier_before": shown[0].pk if shown else 0,
    }


def with_siblings(entries: list[Entry], outline: Outline) -> list[Entry]:
    """The entries, each told where it stands among its siblings (for the branch switcher)."""
    for entry in entries:
        entry.siblings = outline.siblings.get(entry.pk)
    return entries


def start_of_window(roles: Sequence[str], start: int) -> int:
    """Move a window's first entry back so that no tool result is cut off from its call."""
    while start > 0 and start < len(roles) and roles[start] == Entry.Role.TOOL_RESULT:
        start -= 1
    return start
