"""Reading a session file: each line parsed and checked before anything is written, so an
invalid file names its line and leaves nothing behind; the tree's shape checked too (known
parents, unique ids, no cycle)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from django.conf import settings
from django.db import models

from ..models import Entry
from . import fields

MAX_IMPORT_BYTES = 16 * 1024 * 1024
KINDS = {kind.value for kind in Entry.Kind}


class InvalidSessionFile(ValueError):
    """A file that cannot be imported; the message names the line."""


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


def parse(lines: list[str]) -> Iterable[tuple[int, dict[str, Any]]]:
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
    if problem := fields.problem_of(line):
        return problem
    message = line.get("message")
    if line.get("type") == Entry.Kind.MESSAGE and isinstance(message, dict):
        for field, column in (("role", "role"), ("model", "model")):
            if problem := _longer_than_column(message.get(field), column):
                return f"a message's `{field}` {problem}"
        return _content_problem(message.get("content"))
    if problem := _longer_than_column(line.get("customType"), "custom_type"):
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


def has_ids(header: dict[str, Any], entries: list[tuple[int, dict[str, Any]]]) -> bool:
    """Whether the file's entries have ids of their own (versions 2 and 3): version 1's are one
    linear branch in file order, and agentweb issues their ids."""
    return header.get("version", 1) != 1 and any("id" in line for _, line in entries)


def parents_of(
    header: dict[str, Any], entries: list[tuple[int, dict[str, Any]]]
) -> list[tuple[str, str | None]]:
    """(key, parent key) per entry, checked: known parents, unique ids, no cycles."""
    if not has_ids(header, entries):
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
