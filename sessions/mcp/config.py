"""The operator's MCP servers: `AGENTWEB_MCP_SERVERS` names a JSON file in the `mcpServers`
format that Claude Desktop, Claude Code's `.mcp.json` and Cursor share:

    {"mcpServers": {
      "git":  {"command": "uvx", "args": ["mcp-server-git"], "env": {"X": "${X}"}},
      "docs": {"type": "http", "url": "https://mcp.example.com/mcp",
               "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
    }}

`${VAR}` (and `${VAR:-default}`) expand from agentweb's environment, as Claude Code expands
them. Only this file can start a process or name a URL: users choose among its servers.
A file that is missing or malformed stops start-up with the file's name and the fault.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from django.core.exceptions import ImproperlyConfigured

# A server's name becomes part of a tool's name (`mcp__<server>__<tool>`), which the Messages
# API holds to ^[a-zA-Z0-9_-]{1,128}$: no double underscore, so the name splits back.
NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
PREFIX = "mcp__"  # what agentweb names after a server: its tools and its prompts


def named(server: str, item: str) -> str:
    """A server's tool or prompt, as the model and the `/` menu name it: mcp__<server>__<item>."""
    return f"{PREFIX}{server}__{item}"


def split(name: str) -> tuple[str, str] | None:
    """The server and the item a name of `named`'s form names (None: it is no such name)."""
    server, _, item = name.removeprefix(PREFIX).partition("__")
    return (server, item) if name.startswith(PREFIX) and server and item else None


VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ServersFileError(ImproperlyConfigured):
    """The operator's file cannot be used: it says which file, and what is wrong with it."""


@dataclass(frozen=True)
class ServerConfig:
    """One configured server: a command run over stdio, or a streamable HTTP endpoint."""

    name: str
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        """Where it runs, as the Tools page says it: its command line or its URL."""
        return self.url if self.transport == "http" else " ".join([self.command, *self.args])


def load(path: str, environ: Mapping[str, str] | None = None) -> tuple[ServerConfig, ...]:
    """The servers `path` configures, in its order (none when `path` is empty)."""
    if not path:
        return ()
    environ = os.environ if environ is None else environ
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ServersFileError(
            f"AGENTWEB_MCP_SERVERS: cannot read {path}: {error.strerror}."
        ) from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ServersFileError(f"AGENTWEB_MCP_SERVERS: {path} is not JSON: {error}.") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ServersFileError(
            f'AGENTWEB_MCP_SERVERS: {path} has no "mcpServers" object naming the servers.'
        )
    return tuple(_server(path, name, spec, environ) for name, spec in servers.items())


def _server(path: str, name: str, spec: Any, environ: Mapping[str, str]) -> ServerConfig:
    def fault(what: str) -> ServersFileError:
        return ServersFileError(f"AGENTWEB_MCP_SERVERS: {path}: server {name!r} {what}.")

    if not NAME.match(name) or len(name) > 40:
        raise fault("needs a name of letters, digits, '-' and single '_' (at most 40)")
    if not isinstance(spec, dict):
        raise fault("must be an object")

    def expand(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise fault(f"has a {key} that is not a string")

        def variable(found: re.Match[str]) -> str:
            if found[1] in environ:
                return environ[found[1]]
            if found[2] is not None:
                return found[2]
            raise fault(f"uses ${{{found[1]}}} in its {key}, which the environment does not set")

        return VARIABLE.sub(variable, value)

    def strings(key: str) -> dict[str, str]:
        given = spec.get(key, {})
        if not isinstance(given, dict):
            raise fault(f'has "{key}" that is not an object of strings')
        return {str(k): expand(v, f"{key}.{k}") for k, v in given.items()}

    kind = spec.get("type", "http" if "url" in spec else "stdio")
    if kind in ("http", "streamable-http", "streamable_http"):
        url = expand(spec.get("url"), "url")
        if not url.startswith(("http://", "https://")):
            raise fault('needs a "url" that starts with http:// or https://')
        return ServerConfig(name, "http", url=url, headers=strings("headers"))
    if kind != "stdio":
        raise fault(f'has type {kind!r}: agentweb connects "stdio" and "http" servers')
    command = expand(spec.get("command"), "command")
    if not command:
        raise fault('needs a "command"')
    args = spec.get("args", [])
    if not isinstance(args, list):
        raise fault('has "args" that is not a list of strings')
    cwd = spec.get("cwd")
    return ServerConfig(
        name,
        "stdio",
        command=command,
        args=tuple(expand(arg, "args") for arg in args),
        env=strings("env"),
        cwd=None if cwd is None else expand(cwd, "cwd"),
    )
