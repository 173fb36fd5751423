"""Slash commands: the registry the chat box menu shows, and the parser (command-controller).

Text that does not start with `/word` is a prompt. `/etc/hosts is broken`
is a prompt too: a command name ends at whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    hint: str = ""


REGISTRY: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "handoff",
            "Write a handoff document and continue in a new session seeded with it",
            "[--model <id>] [focus instructions]",
        ),
        Command(
            "compact",
            "Write the handoff document and go on in this session from it",
            "[focus instructions]",
        ),
        Command("thinking", "Set how much Claude thinks before replying", "[off|low|medium|high]"),
        Command("model", "Run this session on another model", "[model]"),
        Command("rename", "Give this session a new title", "<title>"),
        Command(
            "instructions",
            "Show or set this session's own instructions (after yours, in every request)",
            "[text | clear]",
        ),
        Command("new", "Start a new session"),
        Command("export", "Download this session", "[md|jsonl]"),
        Command("tree", "See every branch of this session"),
        Command("help", "List the slash commands"),
    )
}

CALL = re.compile(r"^/(?P<name>[A-Za-z][\w-]*)(?:\s+(?P<args>.*))?$", re.DOTALL)


@dataclass(frozen=True)
class Prompt:
    text: str


@dataclass(frozen=True)
class CommandCall:
    name: str
    args: str = ""


@dataclass(frozen=True)
class UnknownCommand:
    name: str
    args: str = ""  # what followed the name (an MCP server's prompt takes it)

    @property
    def message(self) -> str:
        return f"Unknown command /{self.name}. Type / to see the commands."


Parsed = Prompt | CommandCall | UnknownCommand


def parse(text: str, *, template_names: frozenset[str] = frozenset()) -> Parsed:
    """Decide what submitted chat-box text is; `template_names` are the user's prompt templates."""
    match = CALL.match(text.strip())
    if match is None:
        return Prompt(text)
    name, args = match["name"], (match["args"] or "").strip()
    if name in REGISTRY:
        return CommandCall(name, args)
    if name in template_names:
        return Prompt(text)
    return UnknownCommand(name, args)
