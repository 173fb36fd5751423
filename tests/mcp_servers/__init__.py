"""MCP servers the tests run: the tests' own (`workshop.py`), and the operator's file naming
servers, as agentweb reads it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def workshop_spec(notes: Path) -> dict[str, Any]:
    """The tests' own server over stdio, noting what happens to its calls in folder `notes`."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.workshop", "stdio", str(notes)],
        "cwd": str(ROOT),
    }


def servers_file(folder: Path, **servers: dict[str, Any]) -> str:
    """The operator's file naming `servers`, written in `folder`; its path."""
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)
