"""The reply streamer: one model call streamed into a reply, saved as it streams (so a crash
keeps it) and when it ends, and stopped by an abort wherever it is: it cancels the task that
consumes the provider's stream, which closes the model's connection. Whatever happens, the
text so far is kept: a cancelled reply is saved as aborted, a failed one as failed (B11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings

from foundation.database import NOT_ANSWERING, short, until_it_answers

from .. import handoff, thinking
from ..context import ASSISTANT
from ..models import ChatSession, Entry
from ..providers import (
    Provider,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    replayed,
)
from ..store import siblings
from ..tokens import Usage
from .events import Emit

log = logging.getLogger(__name__)
T = TypeVar("T")

# The API's stop reasons, as the reference agent's session file names them.
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "tool_use": "toolUse"}  # fmt: skip


@dataclass
class Reply:
    """A reply as it streams in."""

    parts: list[str] = field(default_factory=list)  # the deltas: joined once, not per delta
    length: int = 0
    usage: Usage = field(default_factory=Usage)
    error_kind: str = ""
    thinking: list[str] = field(default_factory=list)
    signature: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str = ""

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def content(self) -> list[dict[str, Any]]:
        """The reply's blocks as stored (the reference agent's form): its thinking (if any),
        its text, its tool calls."""
        blocks: list[dict[str, Any]] = []
        if self.thinking:
            thought = {"type": "thinking", "thinking": "".join(self.thinking)}
            blocks.append({**thought, "signature": self.signature} if self.signature else thought)
        if self.text:
            blocks.append({"type": "text", "text": self.text})
        for call in self.tool_calls:
            arguments = call.arguments if call.arguments is not None else call.raw
            blocks.append(
                {"type": "toolCall", "id": call.id, "name": call.name, "arguments": arguments}
            )
        return blocks

    def request_message(self) -> dict[str, Any]:
        """The reply as the Messages API takes it back within the tool loop."""
        blocks: list[dict[str, Any]] = []
        if self.thinking and self.signature:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": "".join(self.thinking),
                    "signature": self.signature,
                }
            )
        if self.text:
            blocks.append({"type": "text", "text": self.text})
        for call in self.tool_calls:
            arguments = call.arguments if isinstance(call.arguments, dict) else {}
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
            )
        return {"role": ASSISTANT, "content": blocks}


@dataclass
class Prepared:
    """What a reply is sent instead of the session's whole context, and what it records."""

    messages: list[dict[str, Any]] | None = None  # None: the context as it is
    data: dict[str, Any] = field(default_factory=dict)  # kept in the reply's entry
    failure: str = ""  # set: the reply fails with this reason, unsent
    replay: str | None = None  # set: the reply is this text, written ahead (a handoff draft)
    usage: Usage = field(default_factory=Usage)  # what the text written ahead cost
    thinks: bool = True  # False: no thinking first (a reply going on from its own start)


@dataclass(frozen=True)
class Streamed:
    """How a stream ended: its status and error, and whether the task running it was
    cancelled from outside (the caller raises CancelledError once the reply is kept)."""

    status: str
    error: str = ""
    cancelled_from_outside: bool = False


class Streamer:
    """Streams replies from one provider for one agent, one at a time."""

    def __init__(
        self,
        provider: Provider,
        emit: Emit,
        remember: Callable[[Entry], None],
        *,
        on_delta: Callable[[str], None] | None = None,
        on_thinking: Callable[[str], None] | None = None,
        on_stream_end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.provider = provider
        self.system = ""  # the owner's custom instructions: every request's system prompt
        self.emit = emit
        self.remember = remember  # a saved entry goes into the agent's context
        # Streamed text goes here, synchronously (no task per delta), when given; else it is a
        # message_update event for the listener.
        self.on_delta = on_delta
        self.on_thinking = on_thinking  # streamed thinking, as `on_delta` gets the text
        # Called when a reply's stream ends, before the reply is saved: text `on_delta` holds
        # back for its next batch goes out without waiting for the save.
        self.on_stream_end = on_stream_end
        self.active = False  # a turn is under way: an abort now stops it, streaming or not
        self.aborted = False
        self.abort_reason = "cancelled"
        self.keep = True  # False once the session's claim is lost: write nothing more
        self.purpose = ""  # what streams now (a reply: ""; handoff; handoff_notes)
        self.stage = ""  # which step of it (a part of a handoff's notes)
        self._task: asyncio.Task[None] | None = None
        self._call: asyncio.Future[Any] | None = None  # a tool's call on the loop, if one runs
        self._saver: asyncio.Task[None] | None = None  # saves the reply as it streams
        self._saving: asyncio.Future[None] | None = None  # its save under way, if one is
        self._more = asyncio.Event()  # enough new text to save before the interval is up
        self._saved_chars = 0  # how much of the reply the last partial save kept

    @property
    def is_replying(self) -> bool:
        """An assistant reply is streaming now."""
        return self._task is not None

    def begin(self) -> None:
        """A turn starts: nothing aborted yet."""
        self.active, self.aborted, self.abort_reason = True, False, "cancelled"

    def end(self) -> None:
        self.active = False

    def abort(self, reason: str = "cancelled", *, keep: bool = True) -> bool:
        """Stop the turn; the reply's partial text is kept as an aborted entry (unless `keep`
        is False: the session is no longer this process's to write to). An abort that comes
        before the reply starts streaming stops it from starting."""
        if not self.active:
            return False
        self.aborted, self.abort_reason, self.keep = True, reason, keep
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._call is not None and not self._call.done():
            self._call.cancel()
        return True

    async def during(self, work: Awaitable[T]) -> T | None:
        """Await `work` (a tool's call) so that an abort stops it at once: None when it did
        (or the turn was aborted before it began)."""
        call = self._call = asyncio.ensure_future(work)
        if self.aborted:
            call.cancel()
        try:
            return await call
        except asyncio.CancelledError:
            if _current_task_cancelling():  # the job itself is stopping
                raise
            return None
        finally:
            self._call = None

    async def reply(
        self,
        session: ChatSession,
        purpose: str,
        messages: list[dict[str, Any]],
        prepared: Prepared,
        *,
        beside_others: bool = False,
        tools: Sequence[dict[str, Any]] = (),
    ) -> tuple[Reply, Entry]:
        """Stream one reply to `messages` (or to what `prepared` sends instead) and save it (its
        entry; unsaved if the claim was lost). `beside_others`: it stands beside the reply it
        regenerates."""
        reply = Reply()
        self.purpose, self.stage = purpose, ""
        await self.emit("message_start", role=Entry.Role.ASSISTANT, purpose=purpose)
        # A reply thinks at the session's level; a handoff's document streams at once.
        budget = thinking.budget(session.thinking_level) if prepared.thinks and not purpose else 0
        to_send = messages if prepared.messages is None else prepared.messages
        streamed = await self.stream(
            session, reply, to_send, prepared, thinking_budget=budget, tools=tools
        )
        if self.on_stream_end is not None:
            await asyncio.shield(self.on_stream_end())
        status, error = streamed.status, streamed.error
        if status == Entry.Status.COMPLETE and not reply.text.strip() and not reply.tool_calls:
            status, error = Entry.Status.FAILED, handoff.NO_TEXT
        fields: dict[str, Any] = {
            "status": status,
            "error": error,
            "model": self.provider.model,
            "input_tokens": reply.usage.input,
            "output_tokens": reply.usage.output,
            "cache_read_tokens": reply.usage.cache_read,
            "cache_write_tokens": reply.usage.cache_write,
            "data": {**({"purpose": purpose} if purpose else {}), **prepared.data},
        }
        if status == Entry.Status.COMPLETE:  # why it ended, as the reference agent records it
            fields["data"]["message"] = {"stopReason": STOP_REASONS.get(reply.stop_reason, "stop")}
        await self.settle_partial()
        entry = None if not self.keep else await self.saved(session, reply, beside_others, fields)
        if entry is None:  # the claim was lost: whoever took over keeps the saved partial
            await self.emit("message_end", role=Entry.Role.ASSISTANT, purpose=purpose)
            return reply, Entry(kind=Entry.Kind.MESSAGE, role=Entry.Role.ASSISTANT, **fields)
        self.remember(entry)
        await self.emit("message_end", role=Entry.Role.ASSISTANT, entry=entry, purpose=purpose)
        if streamed.cancelled_from_outside:
            raise asyncio.CancelledError
        return reply, entry

    async def saved(
        self, session: ChatSession, reply: Reply, beside_others: bool, fields: dict[str, Any]
    ) -> Entry | None:
        """The reply's final save, made even when the turn is cancelled, and made again until
        the database answers (the tabs say "Saving…" meanwhile; the reply waits in memory), as
        long as the claim is this process's. None: the claim was lost first."""
        waited = False

        async def waiting() -> None:
            nonlocal waited
            waited = True
            await self.emit("saving", role=Entry.Role.ASSISTANT, purpose=self.purpose)

        def save() -> Awaitable[Entry]:
            return short(_save_reply)(session, reply.content(), beside_others, fields)

        saving = until_it_answers(save, waiting=waiting, going_on=lambda: self.keep)
        try:
            entry = await asyncio.shield(saving)
        except NOT_ANSWERING:
            log.warning("session %s: the reply was not saved: the claim was lost", session.pk)
            return None
        if waited:
            await self.emit("saved", role=Entry.Role.ASSISTANT, purpose=self.purpose)
        return entry

    async def stream(
        self,
        session: ChatSession,
        reply: Reply,
        messages: list[dict[str, Any]],
        prepared: Prepared | None = None,
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> Streamed:
        """Stream one model call (or text `prepared` replays) into `reply`, as a task an abort
        can cancel. Whatever happens, the text so far is in `reply` for the caller to keep."""
        if prepared is not None and prepared.failure:
            return Streamed(Entry.Status.FAILED, prepared.failure)
        if prepared is not None and prepared.replay is not None:
            events = replayed(prepared.replay, prepared.usage)
        else:
            events = self.provider.stream(
                messages, system=self.system or None, max_tokens=max_tokens,
                thinking_budget=thinking_budget, tools=tools,
            )  # fmt: skip
        self._task = asyncio.create_task(self._consume(session, reply, events))
        if self.aborted:  # cancelled before the reply began
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            outside = not self.aborted or _current_task_cancelling()
            reason = "interrupted" if outside else self.abort_reason
            return Streamed(Entry.Status.ABORTED, reason, outside)
        except ProviderError as exc:
            reply.error_kind = exc.kind
            return Streamed(Entry.Status.FAILED, exc.reason)
        except Exception as exc:  # a runtime error must not lose the partial text
            log.exception("generation failed in session %s", session.pk)
            return Streamed(Entry.Status.FAILED, f"{type(exc).__name__}: {exc}")
        finally:
            self._task = None
        return Streamed(Entry.Status.COMPLETE)

    async def _consume(
        self, session: ChatSession, reply: Reply, stream: AsyncIterator[ProviderEvent]
    ) -> None:
        self._saved_chars = 0
        async for event in stream:
            if isinstance(event, TextDelta):
                reply.add(event.text)
                if self.on_delta is not None:
                    self.on_delta(event.text)  # synchronous: an abort cannot cut it in half
                else:
                    # Shielded: an abort cancels this task, but never halfway through telling
                    # the listeners about a delta (they would see a gap in the stream).
                    delta = self.emit("message_update", role=Entry.Role.ASSISTANT, delta=event.text)
                    await asyncio.shield(delta)
                if self._saver is None:
                    self._saver = asyncio.create_task(self._keep_saving(session, reply))
                elif reply.length - self._saved_chars >= settings.AGENTWEB_PARTIAL_SAVE_CHARS:
                    self._more.set()
            elif isinstance(event, ThinkingDelta):
                reply.thinking.append(event.text)
                reply.signature = event.signature or reply.signature
                if event.text and self.on_thinking is not None:
                    self.on_thinking(event.text)
            elif isinstance(event, ToolCall):
                reply.tool_calls.append(event)
            elif isinstance(event, StreamEnd):
                reply.usage, reply.stop_reason = event.usage, event.stop_reason

    async def _keep_saving(self, session: ChatSession, reply: Reply) -> None:
        """Keep the reply so far in the session row every few seconds (or every few thousand
        characters), so a crash keeps it (SPEC B12). The stream never waits for it."""
        save = short(session.save_partial)
        while True:
            with contextlib.suppress(TimeoutError):
                wait = max(0.05, settings.AGENTWEB_PARTIAL_SAVE_SECONDS)
                await asyncio.wait_for(self._more.wait(), wait)
            self._more.clear()
            if reply.length > self._saved_chars and self.keep:
                text = reply.text
                # Shielded: a save that has begun ends, and `settle_partial` waits for it.
                self._saving = asyncio.ensure_future(save(text, self.purpose, self.provider.model))
                try:
                    await asyncio.shield(self._saving)
                except NOT_ANSWERING as error:  # the next save tries again; the final one waits
                    log.warning("session %s: a partial save failed: %s", session.pk, error)
                    continue
                self._saved_chars = len(text)

    async def settle_partial(self) -> None:
        """Stop saving the reply as it streams, and wait for a save under way (on a thread it
        would otherwise land after the final save, which clears it, and be kept as if the reply
        had been interrupted): the final save comes next."""
        if self._saver is not None:
            self._saver.cancel()
        saving, self._saving = self._saving, None
        if saving is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(saving)
        self._saver, self._saved_chars = None, 0


def _save_reply(
    session: ChatSession,
    content: list[dict[str, Any]],
    beside_others: bool,
    fields: dict[str, Any],
) -> Entry:
    """The reply in the session; beside others, it knows its siblings (the page shows its
    branch switcher at once)."""
    entry = session.append_message(Entry.Role.ASSISTANT, content, **fields)
    if beside_others:
        entry.siblings = siblings(entry)
    return entry


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return bool(task and task.cancelling())
