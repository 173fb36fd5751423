"""A tool's result as the model reads it: its text, each image, link and resource named in
words, and its structured content when it said nothing else; clipped to
AGENTWEB_MCP_RESULT_CHARS with a line saying how much was left out."""

from __future__ import annotations

import json

import mcp_types
from django.conf import settings

CLIPPED = "\n[… {left:,} more characters of this result left out]"


def as_text(result: mcp_types.CallToolResult) -> str:
    """The result's words, whole."""
    parts = [_block(block) for block in result.content]
    if result.structured_content is not None and not any(
        isinstance(block, mcp_types.TextContent) for block in result.content
    ):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    return "\n".join(parts) if parts else "(the tool returned nothing)"


def _block(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.name} <{block.uri}>]"
    resource = block.resource
    text = getattr(resource, "text", None)
    return text if isinstance(text, str) else f"[resource: <{resource.uri}>]"


def clipped(text: str, most: int | None = None) -> str:
    """`text` held to `most` characters (AGENTWEB_MCP_RESULT_CHARS), with the count left out."""
    most = settings.AGENTWEB_MCP_RESULT_CHARS if most is None else most
    if len(text) <= most:
        return text
    return text[:most] + CLIPPED.format(left=len(text) - most)
