"""The Tools page: the operator's MCP servers as this process holds them (connected, failed with
its error, not started), each with its transport and its tools' annotations, and the user's
choices: a server or a tool on or off, a tool that changes things asked about or always allowed.
For all the user's sessions (`/tools/`), or for one (`/sessions/<id>/tools/`)."""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render

from ..mcp.config import named, split
from ..mcp.hub import configured, hub, warm
from ..models import ToolChoice
from ..models.tool_choices import ALWAYS, ASK
from ..providers import catalog
from .base import AuthenticatedRequest, own_session

PATIENCE = 3.0  # seconds the page waits for servers that are starting


async def tools(request: HttpRequest, session_id: int | None = None) -> HttpResponse:
    """Every server, connected first if it was not (all at once, each within its start limit),
    and the user's choices (the session's, with `session_id`)."""
    user = await request.auser()
    session = None
    if session_id is not None:
        session = await sync_to_async(own_session)(request, session_id)  # type: ignore[arg-type]
    servers = hub()
    connecting = [task] if (task := warm()) is not None else []
    if connecting:  # a moment for them; a slow one shows as connecting, the page never waits
        await asyncio.wait(connecting, timeout=PATIENCE)
    choices = await sync_to_async(ToolChoice.of)(int(user.pk or 0), session_id)
    scope = choices.session if session is not None else choices.user

    def chosen(name: str) -> tuple[str, str]:
        row = scope.get(name)
        enabled = "" if row is None or row.enabled is None else ("on" if row.enabled else "off")
        return enabled, row.approval if row is not None else ""

    context = {
        "session": session,
        "servers": [
            {
                "server": server,
                "chosen": chosen(name),
                "tools": [
                    (named(name, tool.name), tool, chosen(named(name, tool.name)))
                    for tool in server.tools
                ],
            }
            for name, server in servers.servers.items()
        ],
        "needs_claude": not catalog.has_key(),
    }
    return render(request, "sessions/tools.html", context)


def choose_tools(request: AuthenticatedRequest, session_id: int | None = None) -> HttpResponse:
    """Save the form's choices: `on:<name>` (on, off, or "" as the wider choice says) and
    `approval:<tool>` (ask, always, or ""), for names of the operator's servers only."""
    session = own_session(request, session_id) if session_id is not None else None  # or 404
    if request.method != "POST":  # (after the 404: another user's session is not found)
        return HttpResponseNotAllowed(["POST"])
    servers = {spec.name for spec in configured()}
    wanted: dict[str, dict[str, str]] = {}
    for key in request.POST:
        kind, _, name = key.partition(":")
        if kind in ("on", "approval") and _configured(name, servers):
            wanted.setdefault(name, {})[kind] = str(request.POST.get(key, ""))
    for name, said in wanted.items():
        approval = said.get("approval", "")
        ToolChoice.choose(
            request.user.pk,
            name,
            session_id=session_id,
            enabled={"on": True, "off": False}.get(said.get("on", "")),
            approval=approval if approval in (ALWAYS, ASK) else "",
        )
    messages.success(request, "Saved your tool choices.")
    return redirect("chat:session_tools", session_id) if session else redirect("chat:tools")


def _configured(name: str, servers: set[str]) -> bool:
    """A server of the operator's file, or a tool name of one (`mcp__<server>__<tool>`)."""
    if name in servers:
        return True
    server, _ = split(name) or ("", "")
    return server in servers and len(name) <= 200
