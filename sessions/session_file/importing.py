"""Import: a session from the reference agent's file, every version (1: no ids, one linear
branch in file order; 2 and 3: `id`/`parentId` trees), keeping the kinds agentweb does not run
(model changes, labels, compactions …) as entries of their own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from .. import attachments, context, store, thinking
from ..content import plain_line, text_of, title_from
from ..models import ChatSession, Entry, FileLine, building
from ..providers import catalog
from .reading import InvalidSessionFile, has_ids, parents_of, parse

STATUSES = {"aborted": Entry.Status.ABORTED, "error": Entry.Status.FAILED}
LINE_KEYS = {"type", "id", "parentId", "timestamp"}  # what every entry's line has
# Fields that name another entry of the file: kept as entry keys, written back as new ids.
REFERENCES = ("firstKeptEntryId", "fromId", "targetId")


def import_jsonl(owner: User, lines: list[str]) -> ChatSession:
    """Create a session from session-file lines, all or nothing: every line is checked before
    anything is written, then the entries go in a batch per transaction (`building`: no other
    user waits on a large file) into a session out of sight until its last line is in."""
    rows = list(parse(lines))
    if not rows:
        raise InvalidSessionFile(
            "Line 1: the file is empty; a session file starts with a session header."
        )
    header = rows[0][1]
    entries = rows[1:]
    parents = parents_of(header, entries)
    # It runs on this server's default model; the file's model is shown, not used.
    session = ChatSession.objects.create(
        owner=owner,
        model=catalog.default_model(),
        title=plain_line(str(header.get("title") or ""))[:200],
        created_at=_timestamp(header),
        building=True,
        generation_lease_until=building.lease(),
    )
    try:
        _write(session, header, lines, rows, parents)
    except BaseException:
        building.delete_entries(session.pk)
        session.delete()
        raise
    session.refresh_from_db()
    return session


def _write(
    session: ChatSession,
    header: dict[str, Any],
    lines: list[str],
    rows: list[tuple[int, Any]],
    parents: list[tuple[str, str | None]],
) -> None:
    """The entries, each with its parent and the line it came from, a batch per transaction
    (a parent later in the file than its child is pointed at once both are in)."""
    entries = rows[1:]
    keys = [key for key, _ in parents] if has_ids(header, entries) else [None] * len(entries)
    pending = [
        _with_files(_entry(session, line, key)).derive()
        for (_, line), key in zip(entries, keys, strict=True)
    ]
    FileLine.objects.create(session=session, entry=None, text=_kept(lines, rows[0][0]))
    created: list[Entry] = []
    by_key: dict[str, Entry] = {}

    def write(batch: Sequence[int]) -> None:
        made = Entry.objects.bulk_create([pending[i] for i in batch])
        for i, entry in zip(batch, made, strict=True):
            key, parent_key = parents[i]
            by_key[key] = entry
            entry.parent = by_key.get(parent_key) if parent_key is not None else None
        Entry.objects.bulk_update(made, ["parent"])
        kept = [_kept(lines, entries[i][0]) for i in batch]
        FileLine.objects.bulk_create(
            [FileLine(session=session, entry=e, text=t) for e, t in zip(made, kept, strict=True)]
        )
        created.extend(made)

    building.in_batches(range(len(pending)), write, each=session.renew_building)
    later = []
    for (_, parent_key), entry in zip(parents, created, strict=True):
        if parent_key is not None and entry.parent_id is None:
            entry.parent = by_key[parent_key]
            later.append(entry)
    building.in_batches(
        later,
        lambda batch: Entry.objects.bulk_update(batch, ["parent"]),
        each=session.renew_building,
    )
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
        building=False,
    )


def _with_files(entry: Entry) -> Entry:
    """A user message's images (the reference agent's `{data, mimeType}`) kept as files of the
    importer's, as if attached here: shown, and sent to the model as images. The file's line
    keeps them as they were, for the export."""
    if entry.role != Entry.Role.USER or not any(
        block.get("type") == "image" and "data" in block for block in entry.content
    ):
        return entry
    session = entry.session
    entry.content = [
        (attachments.from_image_block(session.owner_id, session.pk, block) or block)
        if block.get("type") == "image" and "data" in block
        else block
        for block in entry.content
    ]
    return entry


def _kept(lines: list[str], number: int) -> str:
    """Line `number` as the file wrote it (the export writes it back when nothing has moved)."""
    return lines[number - 1].rstrip("\r\n")


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
    building.in_batches(changed, lambda chunk: Entry.objects.bulk_update(chunk, ["data"]))


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


def _entry(session: ChatSession, line: dict[str, Any], key: str | None) -> Entry:
    """The entry of one line. What the export needs to write the line back as it was given
    goes in `data["_file"]` (its id, its timestamp's own text, the form of its content, the
    fields it did not have); every other field is kept where agentweb reads it."""
    kind = line["type"]
    given: dict[str, Any] = {"id": key} if key is not None else {}
    if isinstance(line.get("timestamp"), str):
        given["timestamp"] = line["timestamp"]
    base: dict[str, Any] = {"session": session, "kind": kind, "created_at": _timestamp(line)}
    if kind == Entry.Kind.MESSAGE:
        return _message(base, line, given)
    if kind == Entry.Kind.CUSTOM_MESSAGE:
        return _custom_message(base, line, given)
    fields = {k: v for k, v in line.items() if k not in LINE_KEYS}
    text = fields.get("summary") or fields.get("label") or ""
    custom_data = fields.get("data")
    if isinstance(custom_data, dict) and isinstance(custom_data.get("text"), str):
        text = custom_data["text"]
    return Entry(
        **base,
        custom_type=str(fields.get("customType", "")),
        content=[{"type": "text", "text": str(text)}] if text else [],
        display=bool(fields.get("display", False)),
        data={"fields": fields, "_file": given},
    )


def _message(base: dict[str, Any], line: dict[str, Any], given: dict[str, Any]) -> Entry:
    message = line["message"]
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
    given.update(_content_form(message), extra=_extra(line, LINE_KEYS | {"message"}))
    data: dict[str, Any] = {
        "message": {k: v for k, v in message.items() if k not in ("role", "content")},
        "_file": given,
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


def _custom_message(base: dict[str, Any], line: dict[str, Any], given: dict[str, Any]) -> Entry:
    details = line.get("details")
    own = {"customType", "content", "display", "details"}
    given.update(_content_form(line), extra=_extra(line, LINE_KEYS | own))
    given["absent"] = sorted(name for name in ("customType", "display") if name not in line)
    data = dict(details) if isinstance(details, dict) else {}
    return Entry(
        **base,
        custom_type=str(line.get("customType", "")),
        content=_blocks(line.get("content")),
        display=bool(line.get("display", True)),
        data={**data, "_file": given},
    )


def _content_form(holder: dict[str, Any]) -> dict[str, str]:
    """How the content was given, when it was not a list of blocks: as text, or not at all."""
    if "content" not in holder:
        return {"content": "absent"}
    return {"content": "string"} if isinstance(holder["content"], str) else {}


def _extra(line: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """The line's fields agentweb has no place for, kept as they were."""
    return {name: value for name, value in line.items() if name not in known}


def _title(entries: list[Entry]) -> str:
    """The title of the first user message with words, as a new session gets its own."""
    for entry in entries:
        is_user = entry.kind == Entry.Kind.MESSAGE and entry.role == Entry.Role.USER
        if is_user and (title := title_from(text_of(entry.content))):
            return title
    return "Imported session"
