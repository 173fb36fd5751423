"""Export: a session as the reference agent's JSONL file (the whole tree, the leaf last), and as
Markdown (the current branch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from .. import handoff, store
from ..models import ChatSession, Entry

STOP_REASONS = {
    Entry.Status.COMPLETE: "stop",
    Entry.Status.ABORTED: "aborted",
    Entry.Status.FAILED: "error",
}


def entry_id(entry: Entry) -> str:
    return f"{entry.pk:08x}"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def export_jsonl(session: ChatSession) -> Iterator[str]:
    """The session as JSONL lines: the header, then every entry of the tree, the leaf last."""
    header: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": f"agentweb-{session.pk}",
        "timestamp": _iso(session.created_at),
        "cwd": "",
        "title": session.title,
        "modelId": session.model,
    }
    if session.parent_session_id:
        header["parentSession"] = f"agentweb-{session.parent_session_id}"
    elif session.forked_from_id:
        forked = Entry.objects.filter(pk=session.forked_from_id).values_list("session_id")
        header["parentSession"] = f"agentweb-{forked[0][0]}" if forked else None
    yield _json_line(header)
    entries = sorted(
        Entry.objects.filter(session=session), key=lambda e: (e.pk == session.leaf_id, e.pk)
    )
    for entry in entries:
        yield _json_line(_entry_line(entry))


LINE_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


def _json_line(value: dict[str, Any]) -> str:
    """One JSONL line: UTF-8 as it is, except the characters other tools take as line breaks."""
    line = json.dumps(value, ensure_ascii=False)
    for character, escaped in LINE_BREAKS.items():
        line = line.replace(character, escaped)
    return line + "\n"


def _entry_line(entry: Entry) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": entry.kind,
        "id": entry_id(entry),
        "parentId": f"{entry.parent_id:08x}" if entry.parent_id else None,
        "timestamp": _iso(entry.created_at),
    }
    if entry.kind == Entry.Kind.MESSAGE:
        message: dict[str, Any] = {
            "role": entry.role,
            "content": entry.content,
            "timestamp": int(entry.created_at.timestamp() * 1000),
            **entry.data.get("message", {}),
        }
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
            message.update(
                model=entry.model, stopReason=STOP_REASONS.get(Entry.Status(entry.status), "stop")
            )
            if entry.error:
                message["errorMessage"] = entry.error
        if entry.data.get("purpose"):
            message["agentwebPurpose"] = entry.data["purpose"]
        line["message"] = message
    elif entry.kind == Entry.Kind.CUSTOM_MESSAGE:
        line.update(customType=entry.custom_type, content=entry.content, display=entry.display)
        details = {k: v for k, v in entry.data.items() if k != "fields"}
        if details:
            line["details"] = details
    elif "fields" in entry.data:  # a kind agentweb keeps but does not run: as it came
        line.update(entry.data["fields"])
        line.pop("firstKeptEntryIndex", None)  # version 1's form: written as an id instead
        for name, target in entry.data.get("refs", {}).items():
            line[name] = f"{target:08x}"
    else:  # agentweb's own records (an interruption, a failed switch)
        line.update(customType=entry.custom_type, data={"text": entry.text}, display=entry.display)
    return line


def export_markdown(session: ChatSession) -> str:
    parts = [f"# {session.display_title}\n"]
    for entry in store.get_branch(session):
        if entry.is_handoff:
            parts.append(f"## Handoff document\n\n{handoff.unwrap(entry.text)}\n")
        elif entry.kind == Entry.Kind.MESSAGE:
            heading = {"user": "User", "assistant": "Assistant"}.get(entry.role, entry.role)
            note = "" if entry.status == Entry.Status.COMPLETE else f" ({entry.status})"
            parts.append(f"## {heading}{note}\n\n{entry.text}\n")
        elif entry.display and entry.text:
            parts.append(f"## {entry.custom_type or entry.kind}\n\n{entry.text}\n")
    return "\n".join(parts)
