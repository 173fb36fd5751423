"""A tool's result in words: its text, each image, link and resource named, and its structured
content when it said nothing else. The session keeps it whole (up to a bound); the model reads
it clipped to AGENTWEB_MCP_RESULT_CHARS, with a line saying how much was left out."""

from __future__ import annotations

import json

import mcp_types
from django.conf import settings

from ..content import IMAGE_TYPES

DROPPED = "\n[… {left:,} more characters the server sent were not kept]"


def as_text(result: mcp_types.CallToolResult) -> str:
    """The result's words, whole."""
    parts = [_block(block) for block in result.content]
    if result.structured_content is not None and not any(
        isinstance(block, mcp_types.TextContent) for block in result.content
    ):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    return "\n".join(parts) if parts else "(the tool returned nothing)"


def images(result: mcp_types.CallToolResult) -> list[dict[str, str]]:
    """The result's images as the session keeps them (the reference agent's image blocks):
    those of a kind Claude reads, each within AGENTWEB_MCP_IMAGE_BYTES."""
    most = settings.AGENTWEB_MCP_IMAGE_BYTES * 4 // 3  # base64's length
    return [
        {"type": "image", "data": block.data, "mimeType": block.mime_type}
        for block in result.content
        if isinstance(block, mcp_types.ImageContent)
        and block.mime_type in IMAGE_TYPES
        and len(block.data) <= most
    ]


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


def kept(text: str) -> tuple[str, dict[str, int]]:
    """The result as the session keeps it (at most AGENTWEB_MCP_KEPT_CHARS: a server that
    answers 100 MB costs the database no more), and the details that clip it for the model at
    AGENTWEB_MCP_RESULT_CHARS (`context.as_read`)."""
    most = settings.AGENTWEB_MCP_KEPT_CHARS
    if len(text) > most:
        text = text[:most] + DROPPED.format(left=len(text) - most)
    clip = settings.AGENTWEB_MCP_RESULT_CHARS
    return text, ({"clipped": clip} if len(text) > clip else {})
