"""Export: a session as the reference agent's JSONL file (the whole tree, the leaf last), and as
Markdown (the current branch)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from .. import attached, attachments, handoff, store
from ..models import ChatSession, Entry, FileLine
from ..shapes import part, texts
from .stringify import stringify

STOP_REASONS = {
    Entry.Status.COMPLETE: "stop",
    Entry.Status.ABORTED: "aborted",
    Entry.Status.FAILED: "error",
}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def export_jsonl(session: ChatSession) -> Iterator[str]:
    """The session as JSONL lines: the header, then every entry of the tree, the leaf last.

    An imported session's lines are written back as its file wrote them, byte for byte, when
    nothing has moved: the header while the title is the file's, an entry while its id and
    parent are. Otherwise a line is rebuilt field for field (a version-1 file's entries get the
    ids it had none of); what agentweb wrote is written in the reference agent's form."""
    kept: dict[int | None, str] = dict(
        FileLine.objects.filter(session=session).values_list("entry_id", "text")
    )
    header = _header(session, kept.get(None))  # the header's line has no entry
    yield _as_kept(kept.get(None), _parsed(kept.get(None)), header) or _json_line(header)
    entries = sorted(
        Entry.objects.filter(session=session), key=lambda e: (e.pk == session.leaf_id, e.pk)
    )
    ids = _ids(entries)
    for entry in entries:
        place = {"id": ids[entry.pk], "parentId": ids.get(entry.parent_id or 0)}
        text = kept.get(entry.pk)
        given = _parsed(text)  # once: a version-1 line is read again by `_migrated`
        line = _as_kept(text, given, place) or _migrated(given, place, entry, ids)
        yield line or _json_line(_entry_line(entry, ids))


def _parsed(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def _as_kept(text: str | None, given: Any, fields: dict[str, Any]) -> str | None:
    """The line as its file wrote it (`text`, parsed: `given`), if it still says what `fields`
    say."""
    if text is None or any(given.get(name) != value for name, value in fields.items()):
        return None
    return _escaped(text) + "\n"


def _migrated(line: Any, place: dict[str, Any], entry: Entry, ids: dict[int, str]) -> str | None:
    """A version-1 file's line (it has no id) as the reference agent migrates it, in place:
    its own fields in its own order, then `id` and `parentId` after them, a compaction's
    `firstKeptEntryIndex` replaced by `firstKeptEntryId` after those, and a `hookMessage`
    role named `custom` (version 3's)."""
    if not isinstance(line, dict) or "id" in line:
        return None
    line.update(place)
    if line.get("type") == "compaction" and "firstKeptEntryIndex" in line:
        del line["firstKeptEntryIndex"]
        if isinstance(target := part(entry.data, "refs").get("firstKeptEntryId"), int):
            line["firstKeptEntryId"] = ids.get(target, f"{target:08x}")
    message = line.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"
    return _json_line(line)


def _header(session: ChatSession, kept: str | None) -> dict[str, Any]:
    if kept:  # imported: as the file had it (its order of fields), with the title it has now
        header = {**json.loads(kept), "type": "session"}
        if header.get("version", 1) == 1:
            header["version"] = 3  # its entries get ids now, as version 3 has them
        if "title" in header:
            header["title"] = session.title
        return header
    header = {
        "type": "session",
        "version": 3,
        "id": f"agentweb-{session.pk}",
        "timestamp": _iso(session.created_at),
        "cwd": session.cwd,
        "title": session.title,
        "modelId": session.model,
    }
    if session.parent_session_id:
        header["parentSession"] = f"agentweb-{session.parent_session_id}"
    elif session.forked_from_id:
        forked = Entry.objects.filter(pk=session.forked_from_id).values_list("session_id")
        header["parentSession"] = f"agentweb-{forked[0][0]}" if forked else None
    return header


def _ids(entries: list[Entry]) -> dict[int, str]:
    """Each entry's id in the file: the one its own file gave it, or one agentweb issues (never
    one the file used already)."""
    given = {entry.pk: entry.data["_file"]["id"] for entry in entries if _given(entry).get("id")}
    taken = set(given.values())
    ids = {}
    for entry in entries:
        issued = given.get(entry.pk) or f"{entry.pk:08x}"
        ids[entry.pk] = issued if entry.pk in given or issued not in taken else f"{issued}-aw"
    return ids


def _given(entry: Entry) -> dict[str, Any]:
    """What the entry's own file gave that agentweb keeps only to write it back ({}: none)."""
    given = entry.data.get("_file")
    return given if isinstance(given, dict) else {}


LINE_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


def _json_line(value: dict[str, Any]) -> str:
    """One JSONL line, in the reference agent's form (JSON.stringify's: no spaces, numbers as
    JavaScript writes them)."""
    return _escaped(stringify(value)) + "\n"


def _escaped(line: str) -> str:
    """UTF-8 as it is, except the characters other tools take as line breaks (in a JSON line
    they can only stand in a string, where the escape means the same)."""
    for character, escaped in LINE_BREAKS.items():
        line = line.replace(character, escaped)
    return line


def _entry_line(entry: Entry, ids: dict[int, str]) -> dict[str, Any]:
    given = _given(entry)
    line: dict[str, Any] = {
        "type": entry.kind,
        "id": ids[entry.pk],
        "parentId": ids.get(entry.parent_id) if entry.parent_id else None,
        "timestamp": given.get("timestamp") or _iso(entry.created_at),
        **part(given, "extra"),
    }
    if entry.kind == Entry.Kind.MESSAGE:
        line["message"] = _message(entry, given)
    elif entry.kind == Entry.Kind.CUSTOM_MESSAGE:
        line.update(customType=entry.custom_type, display=entry.display)
        for name in texts(given.get("absent")):
            line.pop(name, None)
        if (content := _content(entry, given)) is not None:
            line["content"] = content
        details = {k: v for k, v in entry.data.items() if k not in ("fields", "_file")}
        if details:
            line["details"] = details
    elif "fields" in entry.data:  # a kind agentweb keeps but does not run: as it came
        line.update(part(entry.data, "fields"))
        line.pop("firstKeptEntryIndex", None)  # version 1's form: written as an id instead
        for name, target in part(entry.data, "refs").items():
            if isinstance(target, int):
                line[name] = ids.get(target, f"{target:08x}")
        if not given:  # agentweb's own (a /compact): in the reference agent's order of fields,
            line = _in_order(line, FIELD_ORDER.get(entry.kind, ()))  # whatever the database's
    else:  # agentweb's own records (an interruption, a failed switch)
        line.update(customType=entry.custom_type, data={"text": entry.text}, display=entry.display)
    return line


# The reference agent's order of a kind's own fields, after type, id, parentId and timestamp.
FIELD_ORDER = {"compaction": ("summary", "firstKeptEntryId", "tokensBefore", "details")}


def _in_order(line: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """`line` with the fields `order` names in that order, after those it does not name."""
    named = [name for name in order if name in line]
    return {**{k: v for k, v in line.items() if k not in named}, **{k: line[k] for k in named}}


def _message(entry: Entry, given: dict[str, Any]) -> dict[str, Any]:
    """The message as its file gave it, or as agentweb records a message it wrote."""
    message: dict[str, Any] = {"role": entry.role}
    if (content := _content(entry, given)) is not None:
        message["content"] = content
    message.update(part(entry.data, "message"))
    if given:
        return message
    message.setdefault("timestamp", int(entry.created_at.timestamp() * 1000))
    if entry.role == Entry.Role.ASSISTANT:
        message.setdefault(
            "usage",
            {
                "input": entry.input_tokens,
                "output": entry.output_tokens,
                "cacheRead": entry.cache_read_tokens,
                "cacheWrite": entry.cache_write_tokens,
            },
        )
        message["model"] = entry.model
        if entry.status != Entry.Status.COMPLETE or "stopReason" not in message:
            message["stopReason"] = STOP_REASONS[Entry.Status(entry.status)]
        if entry.error:
            message["errorMessage"] = entry.error
    if entry.data.get("purpose"):
        message["agentwebPurpose"] = entry.data["purpose"]
    return message


def _content(entry: Entry, given: dict[str, Any]) -> Any:
    """The content as it was given: blocks, text (a string), or nothing (None)."""
    form = given.get("content")
    if form == "absent":
        return None
    if form == "string":
        return entry.text
    return [_as_written(entry, block) for block in entry.content]


def _as_written(entry: Entry, block: Any) -> Any:
    """A block as the reference agent's file has it: a file attached here as an image block
    (`{type, data, mimeType}`), or, for a PDF or a text file, the text it was read as."""
    if not attached.is_attached(block):
        return block
    if block["type"] == "image":
        return attachments.as_image_block(entry.session.owner_id, block)
    return {"type": "text", "text": attached.readable(block)}


def export_markdown(session: ChatSession) -> str:
    parts = [f"# {session.display_title}\n"]
    for entry in store.get_branch(session):
        if entry.is_handoff:
            parts.append(f"## Handoff document\n\n{handoff.unwrap(entry.text)}\n")
        elif entry.kind == Entry.Kind.MESSAGE:
            heading = ROLE_HEADINGS.get(entry.role) or _in_words(entry.role)
            tool = part(entry.data, "message").get("toolName")
            named = f" ({tool})" if entry.role == Entry.Role.TOOL_RESULT and tool else ""
            note = "" if entry.status == Entry.Status.COMPLETE else f" ({entry.status})"
            parts.append(f"## {heading}{named}{note}\n\n{entry.text}\n")
        elif entry.display and entry.text:
            parts.append(f"## {_in_words(entry.custom_type or entry.kind)}\n\n{entry.text}\n")
    return "\n".join(parts)


# A message's heading in the Markdown export, by its role: words, not the file's names.
ROLE_HEADINGS = {
    "user": "You",
    "assistant": "Assistant",
    "toolResult": "Tool result",
    "bashExecution": "Shell command",
    "custom": "Extension message",
    "hookMessage": "Extension message",
}


def _in_words(name: str) -> str:
    """`todo_note` → "Todo note", `branchSummary` → "Branch summary"."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).replace("_", " ").strip()
    return spaced[:1].upper() + spaced[1:].lower() if spaced else "Entry"
