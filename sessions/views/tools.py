"""The Tools page: the operator's MCP servers as this process holds them (connected, failed with
its error, not started), each with its transport and its tools' annotations."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ..agent.mcp_tools import tool_name
from ..mcp.hub import hub
from ..providers import catalog


async def tools(request: HttpRequest) -> HttpResponse:
    """Every server, connected first if it was not (all at once, each within its start limit)."""
    servers = hub()
    await servers.tools()
    context = {
        "servers": [
            {
                "server": server,
                "tools": [(tool_name(name, tool.name), tool) for tool in server.tools],
            }
            for name, server in servers.servers.items()
        ],
        "needs_claude": not catalog.has_key(),
    }
    return render(request, "sessions/tools.html", context)
