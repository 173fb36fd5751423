"""The MCP servers' prompts as slash commands (issue 53): `/mcp__<server>__<prompt> words…`,
as Claude Code names them. The words fill the prompt's arguments in order (quoted words stay
one); the text the server gives is sent as the user's prompt."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import mcp_types

from ..models import Refused
from .config import named, split
from .hub import KNOWN_PROMPTS, ToolFailed, hub


@dataclass(frozen=True)
class MenuPrompt:
    """A server's prompt as the `/` menu shows it."""

    name: str  # mcp__<server>__<prompt>
    description: str
    hint: str  # its arguments: <required> [optional]


def menu() -> list[MenuPrompt]:
    """Every prompt the operator's servers listed in this process, in their order."""
    return [
        MenuPrompt(
            named(server, prompt.name),
            prompt.description or prompt.title or "",
            _hint(prompt),
        )
        for server, prompts in KNOWN_PROMPTS.items()
        for prompt in prompts
    ]


async def text_of(command: str, words: str) -> str:
    """What `/command words` sends: the server's prompt filled in. `Refused` in words when it
    is no prompt of a configured server, lacks an argument, or the server cannot give it."""
    server_name, prompt_name = split(command) or ("", "")
    server = hub().servers.get(server_name)
    if server is None:
        raise Refused(f"Unknown command /{command}. Type / to see the commands.")
    try:
        await server.connected()
    except ToolFailed as failed:
        raise Refused(f"/{command}: {failed}") from None
    prompt = next((p for p in server.prompts if p.name == prompt_name), None)
    if prompt is None:
        raise Refused(f"Unknown command /{command}: {server_name} has no prompt {prompt_name}.")
    try:
        given = shlex.split(words)
    except ValueError:  # an unclosed quote: words as they are typed
        given = words.split()
    arguments = dict(zip((arg.name for arg in prompt.arguments or []), given, strict=False))
    missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in arguments]
    if missing:
        raise Refused(f"/{command} needs {', '.join(missing)}: /{command} {_hint(prompt)}")
    try:
        text = await server.prompt_text(prompt_name, arguments)
    except ToolFailed as failed:
        raise Refused(f"/{command} failed: {failed}") from None
    if not text.strip():
        raise Refused(f"/{command} gave no text to send.")
    return text


def _hint(prompt: mcp_types.Prompt) -> str:
    """Its arguments, as the menu and a refusal say them: <required> [optional]."""
    return " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in prompt.arguments or [])
