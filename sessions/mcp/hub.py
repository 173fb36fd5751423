"""The servers of the operator's file, connected once per process (per event loop) and shared
by every session that uses them.

Each server is held open by a task of its own (the SDK's `Client` is an async context, entered
and left by one task); calls go through it from any task. A server is connected on first use.
One that fails to start or to answer is `failed`, with its error, and is tried again on its next
use; so is a stdio server that died. Nothing here can take agentweb down: every fault becomes
a state and words.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import tempfile
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx2
import mcp_types
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError

from . import config
from .config import ServerConfig

BOUNDED = str(Path(__file__).with_name("bounded.py"))

log = logging.getLogger(__name__)
T = TypeVar("T")

# A call's progress as the server reports it: done so far, the total (if known), and words.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# A server that failed to start is tried again on a use this long after, not before: one that
# hangs at its start would otherwise hold every turn for AGENTWEB_MCP_CONNECT_SECONDS.
RETRY_SECONDS = 30.0
NOT_STARTED, CONNECTING, CONNECTED, FAILED = "not started", "connecting", "connected", "failed"


class ToolFailed(Exception):
    """A call that brought no result: the words say why (timed out, the server went away,
    it answered with an error)."""


@dataclass(frozen=True)
class ServerTool:
    """One tool of one server, as the server lists it."""

    server: str
    tool: mcp_types.Tool

    @property
    def read_only(self) -> bool:
        annotations = self.tool.annotations
        return bool(annotations is not None and annotations.read_only_hint)


class Server:
    """One configured server in this process: its state, its tools, and its connection."""

    def __init__(self, spec: ServerConfig) -> None:
        self.spec = spec
        self.state = NOT_STARTED
        self.error = ""
        self.tools: list[mcp_types.Tool] = []
        self.prompts: list[mcp_types.Prompt] = []
        self.client: Client | None = None
        self.holder: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None
        self.closing = asyncio.Event()
        self.stale = False  # the server said its tools changed: list them again
        self.errors: IO[str] | None = None  # a stdio server's stderr, for its failure's words
        self.retry_at = 0.0  # (the loop's clock) a server that failed to start waits till then

    async def connected(self) -> Client:
        """The client, connecting first if it is not (or died); `ToolFailed` if it cannot."""
        loop = asyncio.get_running_loop()
        if self.state != CONNECTED or self.holder is None or self.holder.done():
            if self.state == FAILED and loop.time() < self.retry_at:
                raise ToolFailed(
                    f"the MCP server {self.spec.name!r} is not available: {self.error}"
                )
            if self.ready is None or self.ready.done():
                self.ready = loop.create_future()
                self.closing = asyncio.Event()
                self.state, self.error = CONNECTING, ""
                self.holder = asyncio.create_task(self.hold(self.ready))
            try:
                async with asyncio.timeout(settings.AGENTWEB_MCP_CONNECT_SECONDS):
                    await asyncio.shield(self.ready)
            except TimeoutError:
                self.fail(f"it did not answer within {settings.AGENTWEB_MCP_CONNECT_SECONDS:g} s")
                if self.holder is not None:  # still at its start: its process is stopped now
                    self.holder.cancel()
            except Exception:  # the holder said why, in `self.error`
                pass
            if self.state != CONNECTED:  # it failed to start: not again for a while
                self.retry_at = loop.time() + RETRY_SECONDS
        if self.state != CONNECTED or self.client is None:
            raise ToolFailed(f"the MCP server {self.spec.name!r} is not available: {self.error}")
        if self.stale:
            await self.list_tools(self.client)
        return self.client

    async def hold(self, ready: asyncio.Future[None]) -> None:
        """Connect, list the tools, and hold the connection open until closed or dead."""
        try:
            async with Client(self.transport(), message_handler=self.on_message) as client:
                await self.list_tools(client)
                await self.list_prompts(client)
                self.client, self.state = client, CONNECTED
                ready.set_result(None)
                listener = asyncio.create_task(self.listen(client))
                try:
                    await self.closing.wait()
                finally:
                    listener.cancel()
                    await asyncio.gather(listener, return_exceptions=True)
        except BaseException as error:  # noqa: BLE001 - every fault is a state, never a crash
            timed_out = isinstance(error, asyncio.CancelledError) and self.state == FAILED
            if not timed_out:  # (a start that timed out, then stopped, said so already)
                self.fail(describe(error, self.stderr_tail()))
            if not ready.done():
                ready.set_exception(ToolFailed(self.error))
                ready.exception()  # retrieved: the waiter reads `self.error`
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self.client = None
            if self.state == CONNECTED:  # closed on purpose
                self.state = NOT_STARTED

    def fail(self, error: str) -> None:
        self.state, self.error = FAILED, error
        log.warning("MCP server %s: %s", self.spec.name, error)

    def transport(self) -> Any:
        spec = self.spec
        if spec.transport == "http":
            timeout = httpx2.Timeout(30.0, read=300.0)  # a stream waits for its next event
            http = httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout)
            return streamable_http_client(spec.url, http_client=http)
        if self.errors is not None:
            self.errors.close()
        # kept open while the server runs (closed by `close`, or at the next start)
        self.errors = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        bounded = [BOUNDED, str(settings.AGENTWEB_MCP_MESSAGE_BYTES), "--", spec.command]
        params = StdioServerParameters(  # the server under the relay that bounds its messages
            command=sys.executable,
            args=["-I", *bounded, *spec.args],
            env=dict(spec.env) or None,
            cwd=spec.cwd,
        )
        return stdio_client(params, errlog=self.errors)

    def stderr_tail(self) -> str:
        """The last lines the stdio server wrote to its stderr (why it failed, often)."""
        if self.errors is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self.errors.seek(0)
            lines = [line for line in self.errors.read().splitlines() if line.strip()]
            return " / ".join(lines[-3:])[-500:]
        return ""

    async def list_tools(self, client: Client) -> None:
        async def page(cursor: str | None) -> tuple[list[mcp_types.Tool], str | None]:
            listed = await client.list_tools(cursor=cursor, cache_mode="refresh")
            return listed.tools, listed.next_cursor

        self.tools, self.stale = await every_page(page), False

    async def list_prompts(self, client: Client) -> None:
        """The server's prompts (none when it offers none), for the `/` menu of every page."""
        if client.server_capabilities.prompts is None:
            return

        async def page(cursor: str | None) -> tuple[list[mcp_types.Prompt], str | None]:
            listed = await client.list_prompts(cursor=cursor)
            return listed.prompts, listed.next_cursor

        self.prompts = await every_page(page)
        KNOWN_PROMPTS[self.spec.name] = tuple(self.prompts)

    async def prompt_text(self, name: str, arguments: dict[str, str]) -> str:
        """Prompt `name` with `arguments`, as the text of the messages it gives."""
        client = await self.connected()
        try:
            async with asyncio.timeout(settings.AGENTWEB_MCP_TIMEOUT):
                got = await client.get_prompt(name, arguments)
        except TimeoutError:
            raise ToolFailed("the server did not give the prompt in time") from None
        except Exception as error:
            raise ToolFailed(describe(error, "")) from None
        texts = [_words(message.content) for message in got.messages]
        return "\n\n".join(text for text in texts if text)

    async def listen(self, client: Client) -> None:
        """Mark the tools stale when the server says they changed: through a
        `subscriptions/listen` stream on a 2026-07-28 connection (`on_message` hears an older
        server's notification). The next use lists them again."""
        try:
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    self.stale = True
        except ListenNotSupportedError:
            return  # an older server: its notification reaches `on_message`
        except MCPError as error:  # the server does not offer the stream: no refresh, said
            log.info("MCP server %s: no tool-list changes (%s)", self.spec.name, error)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.stale = True

    async def call(
        self, name: str, arguments: dict[str, Any], on_progress: Progress | None = None
    ) -> mcp_types.CallToolResult:
        """Call tool `name`; `ToolFailed` with the words when no result comes. Cancelling the
        caller sends MCP's `notifications/cancelled` to the server (the SDK does). `on_progress`
        takes the server's progress notifications for the call."""
        client = await self.connected()
        seconds = settings.AGENTWEB_MCP_TIMEOUT

        async def reported(progress: float, total: float | None, message: str | None) -> None:
            if on_progress is not None:
                await on_progress(progress, total, message)

        try:
            async with asyncio.timeout(seconds):
                return await client.call_tool(name, arguments, progress_callback=reported)
        except TimeoutError:
            raise ToolFailed(f"the call timed out after {seconds:g} s") from None
        except asyncio.CancelledError:
            raise
        except MCPError as error:
            if error.code != mcp_types.CONNECTION_CLOSED:  # the server's own error, in words
                raise ToolFailed(f"the server answered: {error}") from None
            # The server went away mid-call: started again on its next use.
            said = self.stderr_tail()  # a stdio server's last words, if it wrote any
            self.fail("it stopped during a call" + (f" ({said})" if said else ""))
            self.closing.set()
            raise ToolFailed(f"the MCP server {self.spec.name!r} stopped: {self.error}") from None
        except Exception as error:  # an answer the SDK could not read, a transport fault
            raise ToolFailed(describe(error, "")) from None

    async def close(self) -> None:
        self.closing.set()
        if self.holder is not None and self.state == CONNECTING:  # still at its start: stop it
            self.holder.cancel()
        if self.holder is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.holder, 10)
        if self.errors is not None:
            self.errors.close()
            self.errors = None


async def every_page(
    page: Callable[[str | None], Awaitable[tuple[list[T], str | None]]],
) -> list[T]:
    """Every item of a paged listing (`page(cursor)`: its items and the next cursor); a server
    that never ends its listing is cut off at 100 pages."""
    items: list[T] = []
    cursor: str | None = None
    for _ in range(100):
        found, cursor = await page(cursor)
        items += found
        if cursor is None:
            break
    return items


def _words(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    resource = getattr(block, "resource", None)
    text = getattr(resource, "text", None)
    return text if isinstance(text, str) else ""


# The prompts each server listed last in this process (any event loop's hub), by server: the
# pages' `/` menus read them from their threads.
KNOWN_PROMPTS: dict[str, tuple[mcp_types.Prompt, ...]] = {}


def describe(error: BaseException, stderr: str) -> str:
    """An error as a person reads it: the innermost cause of a group, and the server's last
    words on its stderr."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, asyncio.CancelledError):
        words = "the connection was closed"
    elif isinstance(error, ToolFailed):
        words = str(error)
    else:
        words = f"{type(error).__name__}: {error}".strip().rstrip(":")
    return f"{words[:400]} ({stderr})" if stderr else words[:400]


class Hub:
    """This process's servers, by name, in the file's order."""

    def __init__(self, specs: tuple[ServerConfig, ...]) -> None:
        self.servers = {spec.name: Server(spec) for spec in specs}

    async def tools(self) -> list[ServerTool]:
        """Every tool of every server that answers (connecting those not yet connected, all at
        once); a server that fails is left out, its state saying why."""
        await asyncio.gather(*(self.reach(server) for server in self.servers.values()))
        return [
            ServerTool(server.spec.name, tool)
            for server in self.servers.values()
            if server.state == CONNECTED
            for tool in server.tools
        ]

    async def reach(self, server: Server) -> None:
        with contextlib.suppress(ToolFailed):
            await server.connected()

    async def close(self) -> None:
        await asyncio.gather(*(server.close() for server in self.servers.values()))


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    """This process's (this event loop's) servers."""
    loop = asyncio.get_running_loop()
    if loop not in _hubs:
        _hubs[loop] = Hub(configured())
    return _hubs[loop]


def configured() -> tuple[ServerConfig, ...]:
    """The servers the operator's file names (read at start-up, and checked there)."""
    return config.load(settings.AGENTWEB_MCP_SERVERS)


_warming: set[asyncio.Task[list[ServerTool]]] = set()


def warm() -> asyncio.Task[list[ServerTool]] | None:
    """Connect this process's servers in the background, if any is configured and not yet
    connected (a tab opened: its next page's `/` menu lists their prompts); the task that does,
    if one was started."""
    if not settings.AGENTWEB_MCP_SERVERS:
        return None
    servers = hub()
    if all(server.state != NOT_STARTED for server in servers.servers.values()):
        return None
    task = asyncio.get_running_loop().create_task(servers.tools())
    _warming.add(task)
    task.add_done_callback(_warming.discard)
    return task


async def close() -> None:
    """Disconnect this event loop's servers (a stdio server's process ends)."""
    found = _hubs.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
