"""What a file attached to a message says, wherever it is read: the line that names it, its
words (the line and the text read from it), and what it costs in the context. Pure: the
content and context modules read it; `attachments` takes and keeps the files."""

from __future__ import annotations

import math
from typing import Any

from django.template.defaultfilters import filesizeformat

from .tokens import estimate_tokens

Block = dict[str, Any]


def is_attached(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") in ("image", "document", "file")
        and (isinstance(block.get("attachment"), int) and isinstance(block.get("name"), str))
    )


def line(block: Block) -> str:
    """The line that names a file in the context (and what the offline model reads)."""
    what = {"image": "image", "document": "PDF"}.get(block.get("type", ""), "file")
    details = [str(block.get("mimeType") or "")]
    if block.get("width"):
        details.append(f"{block['width']}×{block.get('height')} px")
    if block.get("pages"):
        details.append(f"{block['pages']} page{'s' if block['pages'] != 1 else ''}")
    details.append(filesizeformat(block.get("size") or 0).replace("\xa0", " "))
    return f"[Attached {what}: {block.get('name')} ({', '.join(details)})]"


def readable(block: Block) -> str:
    """The file as words: its line, and the text read from it (search, handoff, coverage)."""
    text = block.get("text")
    if block.get("type") == "file" and isinstance(text, str):
        return f'{line(block)}\n<file name="{block.get("name")}">\n{text}\n</file>'
    if isinstance(text, str) and text.strip():
        return f"{line(block)}\n{text}"
    return line(block)


def tokens(block: Block) -> int:
    """What the file costs in the context, as the API counts it: an image by its pixels once
    scaled to fit 1568 px (at most about 1,600 tokens); a PDF page as text plus an image."""
    if block.get("type") == "image":
        width, height = int(block.get("width") or 0), int(block.get("height") or 0)
        if not width or not height:
            return 1_600
        scale = min(1.0, 1568 / max(width, height))
        return min(1_600, math.ceil(width * scale * height * scale / 750))
    if block.get("type") == "document":
        return int(block.get("pages") or 1) * 1_600 + estimate_tokens(str(block.get("text") or ""))
    return estimate_tokens(readable(block))
