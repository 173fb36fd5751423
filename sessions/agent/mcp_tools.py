"""The operator's MCP tools as the agent's `Tool` values: each tool of each connected server,
named `mcp__<server>__<tool>` (Claude Code's convention), with its description and input schema
as the server gives them. Arguments outside the schema are refused before the call; a call
that brings no result (timed out, the server gone, a JSON-RPC error) is an error result the
model reads. A tool that does not say it only reads asks the user first (`approvals`)."""

from __future__ import annotations

from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

from foundation.database import short

from ..mcp import config, results
from ..mcp.hub import ServerTool, ToolFailed, hub
from ..models import ChatSession, ToolChoice
from .tool import Progress, Tool, ToolInputError, ToolResult


async def offered(session: ChatSession) -> tuple[Tool, ...]:
    """The MCP tools the model may call now in `session`: those of the servers that answer,
    less what the user turned off (for all their sessions, or this one)."""
    found = await hub().tools()
    if not found:
        return ()
    choices = await short(ToolChoice.of)(session.owner_id, session.pk)
    named = [(config.named(f.server, f.tool.name), f) for f in found]
    return tuple(
        as_tool(f, always=choices.always(name))
        for name, f in named
        if choices.enabled(f.server, name)
    )


def as_tool(found: ServerTool, *, always: bool = False) -> Tool:
    """The tool; it asks the user first unless it only reads or the user allows it always."""
    schema = found.tool.input_schema or {"type": "object"}

    async def call(arguments: Any, session: ChatSession, progress: Progress) -> ToolResult:
        checked = _checked(schema, arguments)
        server = hub().servers[found.server]
        try:
            result = await server.call(found.tool.name, checked, progress)
        except ToolFailed as failed:
            return ToolResult(f"The tool call failed: {failed}", True)
        text, clipping = results.kept(results.as_text(result))
        details = {"server": found.server, "tool": found.tool.name, **clipping}
        return ToolResult(text, result.is_error, details, results.images(result))

    return Tool(
        name=config.named(found.server, found.tool.name),
        description=found.tool.description or found.tool.title or found.tool.name,
        input_schema=schema,
        run=call,
        server=found.server,
        asks_first=not (found.read_only or always),
    )


def _checked(schema: dict[str, Any], arguments: Any) -> dict[str, Any]:
    """The arguments, if the tool's schema takes them; else `ToolInputError` with the fault."""
    if not isinstance(arguments, dict):
        raise ToolInputError("The arguments must be a JSON object.")
    try:
        validator = validator_for(schema)(schema)
        error = next(iter(validator.iter_errors(arguments)), None)
    except SchemaError as bad:
        raise ToolInputError(f"The tool's own input schema is invalid: {bad.message}") from None
    if error is not None:
        raise ToolInputError(_words(error))
    return arguments


def _words(error: ValidationError) -> str:
    where = "/".join(str(part) for part in error.absolute_path)
    place = where or "input"
    return f"Not called: the arguments do not match the tool's schema ({place}: {error.message})."
