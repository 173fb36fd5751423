"""What an entry is made of, as the reference agent writes it: its kinds, roles and statuses,
its blocks of content, and the text in them (SPEC.md §1, §5).

Pure: nothing here reads the database. The models, and the pure functions the models need to
write an entry (the context it adds, the items it mentions), stand on this vocabulary, so that
none of them has to import the models.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Protocol

from django.db import models

from . import attached

TITLE_LENGTH = 80
# What a first line may start with that is markdown, not words: heading marks, a quote, a list
# item's bullet or number, a checkbox.
MARKDOWN_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+(?:\[[ xX~/-]\]\s+)?|\d+[.)]\s+)+")
# Inline markdown in a line, each with the words it keeps: an image or link's text, emphasis,
# strike-through and code spans (`a_b` and `2*3*4` are words, not emphasis).
MARKDOWN_INLINE = [
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"(`+)(.+?)\1"), r"\2"),
    (re.compile(r"(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1"), r"\2"),
    (re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])"), r"\1"),
]
INLINE_MARKS = re.compile(r"[\[`*_~]")  # a line without any has no inline markdown
FORK_MARK = "Fork of "


class Kind(models.TextChoices):
    MESSAGE = "message"
    CUSTOM_MESSAGE = "custom_message"
    MODEL_CHANGE = "model_change"
    THINKING_LEVEL_CHANGE = "thinking_level_change"
    COMPACTION = "compaction"
    BRANCH_SUMMARY = "branch_summary"
    LABEL = "label"
    CUSTOM = "custom"


class Role(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "toolResult"


class Status(models.TextChoices):
    COMPLETE = "complete"
    ABORTED = "aborted"
    FAILED = "failed"


class EntryLike(Protocol):
    """What the pure functions read of an entry (`models.Entry` is one)."""

    @property
    def pk(self) -> Any: ...
    @property
    def kind(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def custom_type(self) -> str: ...
    @property
    def content(self) -> Any: ...
    @property
    def data(self) -> Any: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def text(self) -> str: ...


Block = dict[str, Any]


def text_of(content: Any) -> str:
    """Join the `text` blocks of a content value (a string or a list of blocks) with `\\n`."""
    if isinstance(content, str):
        return content
    return "\n".join(
        block.get("text", "")
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


def block_list(content: Any) -> list[Block]:
    """A content value as blocks: a string is one text block; anything not a block is left out."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def block_texts(content: Any) -> Iterable[str]:
    """The texts of a message's content: an attached file as its line and text, an image
    otherwise as a placeholder naming its type."""
    if isinstance(content, str):
        yield content
        return
    for block in block_list(content):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif attached.is_attached(block):  # a file of agentweb's: its line and its text
            yield attached.readable(block)
        elif block.get("type") == "image" and "source" not in block:  # (the API's: unnamed)
            yield image_placeholder(block)


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # the kinds Claude reads


def image_placeholder(block: Block) -> str:
    return f"[image: {block.get('mimeType') or block.get('mime_type') or 'unknown type'}]"


def searchable(content: Any) -> str:
    """The words of an entry's content a person searches for: its text and thinking blocks (or
    the string itself), an attached file's name and text, never the JSON around them."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if attached.is_attached(block):  # a file: its name and the text read from it
            parts.append(attached.readable(block))
        elif isinstance(block, dict):
            for key in ("text", "thinking"):
                if isinstance(block.get(key), str):
                    parts.append(block[key])
    return "\n".join(parts)


def title_from(text: str) -> str:
    """A session's title from its first message: the first line that has words, without its
    markdown marks, cut at a word boundary (with an ellipsis) when longer than TITLE_LENGTH."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    return cut_at_word(plain_line(first_line), TITLE_LENGTH)


def plain_line(line: str) -> str:
    """One line of markdown as the words it shows: no heading, quote or list marks before it
    ("## Plan", "- [ ] Read…"), no emphasis, code or link marks in it, one space apart."""
    line = MARKDOWN_LEAD.sub("", line) or line
    if INLINE_MARKS.search(line):  # most lines have none: the tree reads one an entry
        for mark, words in MARKDOWN_INLINE:
            line = mark.sub(words, line)
    return " ".join(line.split())


def plain_words(text: str) -> str:
    """Lines of markdown as the words they show, on one line."""
    return " ".join(filter(None, (plain_line(line) for line in text.splitlines())))


def cut_at_word(text: str, length: int) -> str:
    """`text`, or when longer than `length` its start cut at a word (never half a word unless
    the first is that long) and ended with an ellipsis."""
    if len(text) <= length:
        return text
    cut = text[: length - 1]
    if text[length - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.-") + "…"


def fork_title(title: str) -> str:
    """The title of a fork of a session titled `title`: it says it is one, once."""
    if not title or title.startswith(FORK_MARK):
        return title or "Fork"
    return cut_at_word(FORK_MARK + title, 200)
