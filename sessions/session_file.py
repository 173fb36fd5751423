"""The reference agent's session file (JSONL), and Markdown: export, and import (SPEC.md §5).

Import accepts every version (1: no ids, one linear branch in file order;
2 and 3: `id`/`parentId` trees), keeps kinds it does not run (model changes,
labels, compactions …) as entries of their own, and checks everything before
it writes anything: an invalid file names its line and leaves nothing behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import context, coverage, handoff, store, thinking
from .models import ChatSession, Entry, text_of
from .providers import catalog
from .search import searchable

MAX_IMPORT_BYTES = 16 * 1024 * 1024
KINDS = {kind.value for kind in Entry.Kind}
STOP_REASONS = {
    Entry.Status.COMPLETE: "stop",
    Entry.Status.ABORTED: "aborted",
    Entry.Status.FAILED: "error",
}
STATUSES = {"aborted": Entry.Status.ABORTED, "error": Entry.Status.FAILED}
# Message fields with columns of their own; every other field is kept in `data["message"]`.
MESSAGE_COLUMNS = (
    "role", "content", "timestamp", "model", "stopReason", "errorMessage", "agentwebPurpose"
)  # fmt: skip
# Fields that name another entry of the file: kept as entry keys, written back as new ids.
REFERENCES = ("firstKeptEntryId", "fromId", "targetId")


class InvalidSessionFile(ValueError):
    """A file that cannot be imported; the message names the line."""


# --- export ----------------------------------------------------------------------
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


# --- import ----------------------------------------------------------------------
def read_lines(stream: IO[bytes], size: int) -> list[str]:
    if size > MAX_IMPORT_BYTES:
        raise InvalidSessionFile(
            f"File too large: {size / 1_048_576:.1f} MB (the limit is "
            f"{MAX_IMPORT_BYTES // 1_048_576} MB)."
        )
    try:
        text = stream.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidSessionFile(f"The file is not UTF-8 text (byte {error.start}).") from None
    # Lines end at "\n" only: str.splitlines() would also split inside a JSON string at
    # U+2028, U+2029 or U+0085, which JSON allows unescaped.
    return [line.removesuffix("\r") for line in text.split("\n")]


def import_jsonl(owner: User, lines: list[str]) -> ChatSession:
    """Create a session from session-file lines, all or nothing."""
    rows = list(_parse(lines))
    if not rows:
        raise InvalidSessionFile(
            "Line 1: the file is empty; a session file starts with a session header."
        )
    header = rows[0][1]
    entries = rows[1:]
    parents = _parents(header, entries)
    with transaction.atomic():
        # It runs on this server's default model; the file's model is shown, not used.
        session = store.new_session(
            owner, model=catalog.default_model(), title=str(header.get("title") or "")[:200]
        )
        created = [_entry(session, number, line) for number, line in entries]
        for entry in created:
            entry.items = coverage.entry_items(entry)
            entry.search_text = searchable(entry.content)
        created = Entry.objects.bulk_create(created)
        by_key = {key: entry for (key, _), entry in zip(parents, created, strict=True)}
        for (_, parent_key), entry in zip(parents, created, strict=True):
            entry.parent = by_key[parent_key] if parent_key is not None else None
        Entry.objects.bulk_update(created, ["parent"], batch_size=500)
        _resolve_references(created, by_key, [key for key, _ in parents])
        leaf = created[-1] if created else None
        branch = store.branch_ending_at(leaf.pk if leaf else None, created)
        ChatSession.objects.filter(pk=session.pk).update(
            leaf=leaf,
            title=session.title or _title(created),
            imported_model=_file_model(header, branch)[:200],
            cwd=str(header.get("cwd") or "")[:500],
            context_tokens=context.context_tokens(branch),
            thinking_level=thinking.level_on(branch),
        )
    session.refresh_from_db()
    return session


def _resolve_references(created: list[Entry], by_key: dict[str, Entry], keys: list[str]) -> None:
    """Point `firstKeptEntryId`, `fromId` and `targetId` at entries of the new session.

    Version 1 compactions give `firstKeptEntryIndex`, an index into the file's lines with
    the header at 0 (so entry i of the file is line i + 1), as the reference agent reads it.
    """
    changed = []
    for entry in created:
        fields = entry.data.get("fields")
        if not isinstance(fields, dict):
            continue
        refs: dict[str, int] = {}
        for name in REFERENCES:
            target = by_key.get(fields[name]) if isinstance(fields.get(name), str) else None
            if target is not None:
                refs[name] = target.pk
        index = fields.get("firstKeptEntryIndex")
        if isinstance(index, int) and not isinstance(index, bool) and 1 <= index <= len(keys):
            refs["firstKeptEntryId"] = by_key[keys[index - 1]].pk
        if refs:
            entry.data["refs"] = refs
            changed.append(entry)
    Entry.objects.bulk_update(changed, ["data"], batch_size=500)


def _file_model(header: dict[str, Any], branch: list[Entry]) -> str:
    """The model the file last ran on: its last model change or reply on the branch, or the
    header's (the reference agent's rule), as `provider/model`."""
    for entry in reversed(branch):
        fields = entry.data.get("fields", {})
        if entry.kind == Entry.Kind.MODEL_CHANGE and (fields.get("modelId") or fields.get("model")):
            return _model_name(fields.get("provider"), fields.get("modelId") or fields["model"])
        if entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.ASSISTANT and entry.model:
            return _model_name(entry.data.get("message", {}).get("provider"), entry.model)
    model = header.get("modelId") or header.get("model")
    return _model_name(header.get("provider"), model) if model else ""


def _model_name(provider: Any, model: Any) -> str:
    return f"{provider}/{model}" if provider else str(model)


def _parse(lines: list[str]) -> Iterable[tuple[int, dict[str, Any]]]:
    entries = sum(1 for raw in lines if raw.strip()) - 1
    if entries > settings.AGENTWEB_MAX_IMPORT_ENTRIES:
        raise InvalidSessionFile(
            f"The file has {entries:,} entries (the limit is "
            f"{settings.AGENTWEB_MAX_IMPORT_ENTRIES:,})."
        )
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw, parse_constant=_not_json)
        except json.JSONDecodeError as error:
            raise InvalidSessionFile(f"Line {number}: not valid JSON ({error.msg}).") from None
        except ValueError as error:
            raise InvalidSessionFile(f"Line {number}: not valid JSON ({error}).") from None
        except RecursionError:
            raise InvalidSessionFile(f"Line {number}: nested too deeply.") from None
        if not isinstance(line, dict):
            raise InvalidSessionFile(f"Line {number}: expected a JSON object.")
        if problem := _shape_problem(line):
            raise InvalidSessionFile(f"Line {number}: {problem}")
        kind = line.get("type")
        if number == 1 or kind == "session":
            if number != 1 or kind != "session":
                raise InvalidSessionFile(
                    f"Line {number}: the session header must be the first line."
                )
        elif kind not in KINDS:
            raise InvalidSessionFile(f"Line {number}: unknown entry type {kind!r}.")
        elif kind == Entry.Kind.MESSAGE and not isinstance(line.get("message"), dict):
            raise InvalidSessionFile(f"Line {number}: a message entry needs a `message` object.")
        if problem := _problem(line):
            raise InvalidSessionFile(f"Line {number}: {problem}")
        yield number, line


MAX_DEPTH = 64
TOKEN_FIELDS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def _shape_problem(line: dict[str, Any]) -> str:
    """Nesting deeper than MAX_DEPTH, or text no database can keep: NUL (PostgreSQL refuses
    it) or half of a surrogate pair. One iterative walk: a hostile file cannot exhaust the
    stack. Too deep is the problem named when a line has both."""
    unstorable = ""
    stack: list[tuple[Any, int]] = [(line, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            if depth > MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} levels deep."
            children = [*current, *current.values()] if isinstance(current, dict) else current
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(current, str) and not unstorable:
            unstorable = _unstorable(current)
    return unstorable


def _problem(line: dict[str, Any]) -> str:
    """What makes a line unusable, in words (empty: nothing)."""
    stamp = line.get("timestamp")
    if stamp is not None and not isinstance(stamp, str):
        return "`timestamp` must be an ISO date and time."
    if isinstance(stamp, str):
        try:
            parse_datetime(stamp)
        except ValueError:
            return f"impossible timestamp {stamp[:40]!r}."
    message = line.get("message")
    if line.get("type") == Entry.Kind.MESSAGE and isinstance(message, dict):
        usage = message.get("usage")
        if usage is not None and not (
            isinstance(usage, dict)
            and all(_count(usage.get(name)) for name in TOKEN_FIELDS if name in usage)
        ):
            return "`usage` must hold whole, non-negative token counts."
        for field in ("role", "stopReason", "errorMessage", "model", "provider"):
            if not isinstance(message.get(field, ""), str | None):
                return f"a message's `{field}` must be a string."
        for field, column in (("role", "role"), ("model", "model")):
            if problem := _longer_than_column(message.get(field), column):
                return f"a message's `{field}` {problem}"
        return _content_problem(message.get("content"))
    custom_type = line.get("customType")
    if not isinstance(custom_type, str | None):
        return "`customType` must be a string."
    if problem := _longer_than_column(custom_type, "custom_type"):
        return f"`customType` {problem}"
    if line.get("type") == Entry.Kind.CUSTOM_MESSAGE:
        return _content_problem(line.get("content"))
    return ""


def _longer_than_column(value: str | None, column: str) -> str:
    """Text longer than the entry's column for it can hold (empty: it fits)."""
    field = Entry._meta.get_field(column)
    assert isinstance(field, models.CharField)
    limit = field.max_length
    if value is not None and limit is not None and len(value) > limit:
        return f"is longer than {limit} characters."
    return ""


def _unstorable(text: str) -> str:
    if "\x00" in text:
        return "contains a NUL character (U+0000), which cannot be stored."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains half of a surrogate pair (not text), which cannot be stored."
    return ""


def _not_json(name: str) -> Any:
    """Python's json reads NaN and Infinity; JSON (and the database) does not."""
    raise ValueError(f"{name} is not a JSON number")


def _count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _content_problem(content: Any) -> str:
    if content is None or isinstance(content, str):
        return ""
    if not isinstance(content, list):
        return "`content` must be a string or a list of blocks."
    for block in content:
        if not isinstance(block, dict):
            return "each block of `content` must be an object."
        for field, kind in (("text", "text"), ("thinking", "thinking")):
            if block.get("type") == kind and not isinstance(block.get(field), str):
                return f"a {kind} block's `{field}` must be a string."
        if block.get("type") == "toolCall" and not isinstance(block.get("name", ""), str):
            return "a tool call's `name` must be a string."
    return ""


def _parents(
    header: dict[str, Any], entries: list[tuple[int, dict[str, Any]]]
) -> list[tuple[str, str | None]]:
    """(key, parent key) per entry, checked: known parents, unique ids, no cycles."""
    version = header.get("version", 1)
    if version == 1 or not any("id" in line for _, line in entries):
        keys = [str(i) for i in range(len(entries))]
        return [(key, keys[i - 1] if i else None) for i, key in enumerate(keys)]
    pairs: list[tuple[str, str | None]] = []
    numbers: dict[str, int] = {}
    for number, line in entries:
        key, parent = line.get("id"), line.get("parentId")
        if not isinstance(key, str) or not key:
            raise InvalidSessionFile(f"Line {number}: an entry needs a string `id`.")
        if key in numbers:
            raise InvalidSessionFile(
                f"Line {number}: id {key!r} was already used on line {numbers[key]}."
            )
        if parent is not None and not isinstance(parent, str):
            raise InvalidSessionFile(f"Line {number}: `parentId` must be a string or null.")
        numbers[key] = number
        pairs.append((key, parent))
    parent_of = dict(pairs)
    for key, parent in pairs:
        if parent is not None and parent not in parent_of:
            raise InvalidSessionFile(
                f"Line {numbers[key]}: parentId {parent!r} is not an entry of this file."
            )
    _check_acyclic(parent_of, numbers)
    return pairs


def _check_acyclic(parent_of: dict[str, str | None], numbers: dict[str, int]) -> None:
    """One pass over the tree: each walk to the root stops at an entry already known good."""
    good: set[str] = set()
    for key in parent_of:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = key
        while current is not None and current not in good:
            if current in on_path:
                raise InvalidSessionFile(f"Line {numbers[current]}: parentId forms a cycle.")
            path.append(current)
            on_path.add(current)
            current = parent_of[current]
        good.update(path)


def _timestamp(line: dict[str, Any]) -> datetime:
    value = line.get("timestamp")
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is not None and timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)  # the reference agent writes UTC
    return moment or timezone.now()


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _entry(session: ChatSession, number: int, line: dict[str, Any]) -> Entry:
    kind = line["type"]
    base: dict[str, Any] = {"session": session, "kind": kind, "created_at": _timestamp(line)}
    if kind == Entry.Kind.MESSAGE:
        message = line["message"]
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        data: dict[str, Any] = {
            "message": {k: v for k, v in message.items() if k not in MESSAGE_COLUMNS}
        }
        if message.get("agentwebPurpose"):
            data["purpose"] = message["agentwebPurpose"]
        return Entry(
            **base,
            role=str(message.get("role", "")),
            content=_blocks(message.get("content")),
            status=STATUSES.get(message.get("stopReason", ""), Entry.Status.COMPLETE),
            error=str(message.get("errorMessage") or ""),
            model=str(message.get("model") or ""),
            input_tokens=int(usage.get("input") or 0),
            output_tokens=int(usage.get("output") or 0),
            cache_read_tokens=int(usage.get("cacheRead") or 0),
            cache_write_tokens=int(usage.get("cacheWrite") or 0),
            data=data,
        )
    if kind == Entry.Kind.CUSTOM_MESSAGE:
        details = line.get("details")
        return Entry(
            **base,
            custom_type=str(line.get("customType", "")),
            content=_blocks(line.get("content")),
            display=bool(line.get("display", True)),
            data=details if isinstance(details, dict) else {},
        )
    fields = {k: v for k, v in line.items() if k not in ("type", "id", "parentId", "timestamp")}
    text = fields.get("summary") or fields.get("label") or ""
    custom_data = fields.get("data")
    if isinstance(custom_data, dict) and isinstance(custom_data.get("text"), str):
        text = custom_data["text"]
    return Entry(
        **base,
        custom_type=str(fields.get("customType", "")),
        content=[{"type": "text", "text": str(text)}] if text else [],
        display=bool(fields.pop("display", False)),
        data={"fields": fields},
    )


def _title(entries: list[Entry]) -> str:
    """The title of the first user message with words, as a new session gets its own."""
    for entry in entries:
        is_user = entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.USER
        if is_user and (title := store.title_from(text_of(entry.content))):
            return title
    return "Imported session"
