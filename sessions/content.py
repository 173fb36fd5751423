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

TITLE_LENGTH = 80
# What a first line may start with that is markdown, not words: heading marks, a quote, a list
# item's bullet or number, a checkbox.
MARKDOWN_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+(?:\[[ xX~/-]\]\s+)?|\d+[.)]\s+)+")


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
    """The texts of a message's content, an image as a placeholder naming its type."""
    if isinstance(content, str):
        yield content
        return
    for block in block_list(content):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif block.get("type") == "image":
            yield image_placeholder(block)


def image_placeholder(block: Block) -> str:
    return f"[image: {block.get('mimeType') or block.get('mime_type') or 'unknown type'}]"


def searchable(content: Any) -> str:
    """The words of an entry's content a person searches for: its text and thinking blocks (or
    the string itself), never the JSON around them."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict):
            for key in ("text", "thinking"):
                if isinstance(block.get(key), str):
                    parts.append(block[key])
    return "\n".join(parts)


def title_from(text: str) -> str:
    """A session's title from its first message: the first line that has words, without its
    markdown marks, cut at a word boundary (with an ellipsis) when longer than TITLE_LENGTH."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    first_line = MARKDOWN_LEAD.sub("", first_line) or first_line  # "## Plan", "- [ ] Read…"
    title = " ".join(first_line.split())
    if len(title) <= TITLE_LENGTH:
        return title
    cut = title[: TITLE_LENGTH - 1]
    if title[TITLE_LENGTH - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]  # never half a word, unless the first word is that long
    return cut.rstrip(" ,;:.-") + "…"
