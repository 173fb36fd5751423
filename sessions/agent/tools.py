"""The agent's tools: the registry of those a session offers, and the loop that runs the
model's calls.

A tool is a `Tool` value (tool.py). Adding one is a module beside `todo_write.py` and one line
in TOOLS. Input that is not valid JSON, or that the tool refuses (ToolInputError), becomes an
error result the model can read and correct: a tool call never stops the generation.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from channels.db import database_sync_to_async
from django.conf import settings

from foundation.database import short

from ..context import USER, as_read
from ..models import ChatSession, Entry
from ..models.questions import ALLOWED
from ..providers import Provider, ToolCall
from . import mcp_tools
from .approvals import Approvals, refusal
from .events import Emit
from .handoff_tool import HANDOFF, proposed_focus
from .recall_tool import RECALL
from .streamer import Prepared, Streamer
from .todo_write import TODO_WRITE
from .tool import Progress, Tool, ToolInputError, ToolResult

TOOL_LIMIT = "tool_limit"  # the tool loop stopped at its bound
TOOL_LIMIT_TEXT = (
    "Stopped after {rounds} rounds of tool calls in one reply: send a message to let the model "
    "go on."
)


TOO_MANY = "Not run: a round runs at most {} tool calls; make this call again in the next round."
PROGRESS_EVERY = 0.25  # seconds between two progress updates of a call shown in the page
CANCELLED = "The user cancelled this call: it was stopped before it returned."

# The tools, in the order the model is told of them; each session offers those it `offered`.
TOOLS: tuple[Tool, ...] = (TODO_WRITE, RECALL, HANDOFF)


def offered_tools(session: ChatSession) -> tuple[Tool, ...]:
    """The tools `session` offers (recall: only where there is a lineage to recall from)."""
    return tuple(tool for tool in TOOLS if tool.offered is None or tool.offered(session))


async def offered_to(
    session: ChatSession, provider: Provider, tools: tuple[Tool, ...] | None = None
) -> tuple[Tool, ...]:
    """Every tool `provider`'s model may call in `session`: the session's own (`tools`, when
    the caller read them already) and the MCP tools, when the model calls them."""
    if tools is None:
        tools = await short(offered_tools)(session)
    if provider.calls_mcp_tools:
        tools += await mcp_tools.offered(session)
    return tools


def named(name: str, tools: tuple[Tool, ...]) -> Tool | None:
    """The tool of `tools` the model called by `name`, if any."""
    return next((tool for tool in tools if tool.name == name), None)


def run_tool(call: ToolCall, session: ChatSession, tools: tuple[Tool, ...] = TOOLS) -> ToolResult:
    """Run one call. Bad input is an error result the model can correct, never an exception."""
    tool = named(call.name, tools)
    if tool is None:
        names = ", ".join(tool.name for tool in tools)
        return ToolResult(f"Unknown tool {call.name!r}: the tools are {names}.", True)
    if call.arguments is None:
        return ToolResult(f"The input is not valid JSON: {call.raw[:200]!r}", True)
    try:
        return cast(Callable[[Any, ChatSession], ToolResult], tool.run)(call.arguments, session)
    except ToolInputError as error:
        return ToolResult(str(error), True)


async def run_on_the_loop(
    tool: Tool, call: ToolCall, session: ChatSession, streamer: Streamer, progress: Progress
) -> ToolResult:
    """Run a call of an async tool (an MCP tool's), so that a Cancel stops it at once (the
    SDK tells its server); bad input is an error result, as `run_tool`'s. `progress` takes
    what it reports as it runs."""
    if call.arguments is None:
        return ToolResult(f"The input is not valid JSON: {call.raw[:200]!r}", True)
    run = cast(Callable[[Any, ChatSession, Progress], Awaitable[ToolResult]], tool.run)
    running = run(call.arguments, session, progress)
    try:
        done = await streamer.during(running)
    except ToolInputError as error:
        return ToolResult(str(error), True)
    return ToolResult(CANCELLED, True) if done is None else done


def image_block(image: dict[str, str]) -> dict[str, Any]:
    """A kept image as the Messages API takes it."""
    source = {"type": "base64", "media_type": image["mimeType"], "data": image["data"]}
    return {"type": "image", "source": source}


def record_result(
    session: ChatSession,
    call_id: str,
    tool_name: str,
    text: str,
    *,
    is_error: bool = False,
    details: dict[str, Any] | None = None,
    images: list[dict[str, str]] | None = None,
) -> Entry:
    """A tool's result, as the reference agent stores it: a `toolResult` message naming the call
    it answers (its `details` hold what the tool produced, e.g. the todo list it set)."""
    message: dict[str, Any] = {"toolCallId": call_id, "toolName": tool_name, "isError": is_error}
    if details:
        message["details"] = details
    content = [{"type": "text", "text": text}, *(images or [])]
    return session.append_message(Entry.Role.TOOL_RESULT, content, data={"message": message})


class ToolLoop:
    """One reply with its tool rounds: while the model calls tools, run them, store their
    results and let it go on, for at most AGENTWEB_MAX_TOOL_ROUNDS rounds. A cancel stops the
    loop wherever it is."""

    def __init__(
        self,
        session: ChatSession,
        streamer: Streamer,
        emit: Emit,
        messages: list[dict[str, Any]],
        *,
        approvals: Approvals | None = None,
        generation_id: str = "",
    ) -> None:
        self.session = session
        self.streamer = streamer
        self.emit = emit
        self.approvals = approvals or Approvals()
        self.generation_id = generation_id
        self.proposed_handoff: str | None = None  # an allowed `handoff` call's focus
        # The request, as the model reads it: the context, then each round's structured
        # tool_use and tool_result blocks.
        self.request = [{"role": m["role"], "content": list(m["content"])} for m in messages]

    async def answer(
        self, *, beside_others: bool = False, tools: tuple[Tool, ...] | None = None
    ) -> Entry:
        """The model's last reply of the loop. `tools`: those the session offers, when the
        caller read them already."""
        rounds = 0
        self.tools = await offered_to(self.session, self.streamer.provider, tools)
        definitions = [tool.definition for tool in self.tools]
        while True:
            reply, entry = await self.streamer.reply(
                self.session,
                "",
                self.request,
                Prepared(),
                beside_others=beside_others,
                tools=definitions,
            )
            beside_others = False  # only the first reply stands beside the one it replaces
            done = entry.status != Entry.Status.COMPLETE or not self.streamer.keep
            if not reply.tool_calls or done:
                return entry
            self.request.append(reply.request_message())
            self.request.append(await self._run(reply.tool_calls, entry))
            rounds += 1
            if self.streamer.aborted:
                return entry
            if rounds >= settings.AGENTWEB_MAX_TOOL_ROUNDS:
                limit = await database_sync_to_async(self.session.append_custom)(
                    TOOL_LIMIT, TOOL_LIMIT_TEXT.format(rounds=rounds)
                )
                await self.emit("message_end", role="", entry=limit)
                return entry

    async def _run(self, calls: list[ToolCall], caller: Entry) -> dict[str, Any]:
        """Run the reply's calls; each result is stored as a toolResult message (and put in the
        context); returns the results as the next request's user message."""
        blocks: list[dict[str, Any]] = []
        most = settings.AGENTWEB_MAX_TOOL_CALLS
        for number, call in enumerate(calls, start=1):
            tool = named(call.name, self.tools)
            if tool is not None and tool.on_the_loop and number <= most:
                result = await self._asked_and_run(tool, call, caller)
                entry = await database_sync_to_async(self._recorded)(call, result)
                if not result.is_error and (focus := proposed_focus(result.details)) is not None:
                    self.proposed_handoff = focus
            else:
                result, entry = await database_sync_to_async(self._answer)(call, number <= most)
            self.streamer.remember(entry)
            await self.emit("tool_end", role=Entry.Role.TOOL_RESULT, entry=entry, caller=caller)
            read = as_read(result.text, result.details)  # (a long one clipped: kept whole)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": read}
            if result.images:  # the model sees them, as image blocks after the words
                block["content"] = [
                    {"type": "text", "text": read},
                    *map(image_block, result.images),
                ]
            blocks.append({**block, "is_error": True} if result.is_error else block)
        return {"role": USER, "content": blocks}

    async def _asked_and_run(self, tool: Tool, call: ToolCall, caller: Entry) -> ToolResult:
        """An async tool's call, asked of the user first when the tool changes things (and its
        arguments are the object it takes); its progress shown in the call's line."""
        if tool.asks_first and isinstance(call.arguments, dict):
            answer = await self.approvals.ask(
                self.session, self.generation_id, call, tool, self.streamer, self.emit
            )
            if answer not in ALLOWED:
                return ToolResult(refusal(answer), True)
        progress = self._progress_of(call, caller)
        return await run_on_the_loop(tool, call, self.session, self.streamer, progress)

    def _progress_of(self, call: ToolCall, caller: Entry) -> Progress:
        """What shows a call's progress in its line: at most 4 updates a second, each a short
        line (a server that floods it costs the tabs nothing more)."""
        index = next(
            (n for n, block in enumerate(caller.content or [])
             if isinstance(block, dict) and block.get("id") == call.id),
            -1,
        )  # fmt: skip
        shown = [0.0]

        async def progress(done: float, total: float | None, message: str | None) -> None:
            now = time.monotonic()
            if index < 0 or now - shown[0] < PROGRESS_EVERY:
                return
            shown[0] = now
            words = f"{done:g} of {total:g}" if total else f"{done:g}"
            text = f"{words}: {message}" if message else words
            await self.emit("tool_progress", caller=caller, index=index, delta=text[:200])

        return progress

    def _answer(self, call: ToolCall, runs: bool) -> tuple[ToolResult, Entry]:
        """Run a call (or refuse it: past the round's cap) and store its result."""
        if runs:
            result = run_tool(call, self.session, self.tools)
        else:
            result = ToolResult(TOO_MANY.format(settings.AGENTWEB_MAX_TOOL_CALLS), True)
        return result, self._recorded(call, result)

    def _recorded(self, call: ToolCall, result: ToolResult) -> Entry:
        return record_result(
            self.session, call.id, call.name, result.text, is_error=result.is_error,
            details=result.details, images=result.images,
        )  # fmt: skip
