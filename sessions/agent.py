"""AgentSession: the runtime around one chat session (the reference agent's agent-session).

It owns the active LLM message list, streams replies from a provider, persists
them at message end, and emits the reference agent's events. `handoff()`
generates the handoff document through the normal prompt path and switches the
agent to the new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from . import context, coverage, handoff, store, thinking, todos, window
from .context import ASSISTANT, USER, add_to_context, estimate_tokens
from .coverage import Item
from .handoff import NothingToHandOff, StructureReport
from .models import ChatSession, Entry, PendingPrompt, Preferences
from .providers import (
    Provider,
    ProviderError,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    Usage,
    get_provider,
)

log = logging.getLogger(__name__)

NOTES = "handoff_notes"  # a handoff's notes on a stretch too long to send whole
TOOLS = (todos.TOOL,)  # the tools the agent offers the model
TOOL_LIMIT = "tool_limit"  # the tool loop stopped at its bound
TOOL_LIMIT_TEXT = (
    "Stopped after {rounds} rounds of tool calls in one reply: send a message to let the model "
    "go on."
)
# The context a job leaves for the next job of its session: (leaf id, messages), newest last.
CONTEXTS: dict[int, tuple[int | None, list[dict[str, Any]]]] = {}
MAX_CONTEXTS = 64


@dataclass(frozen=True)
class AgentEvent:
    """One of agent_start, message_start, message_update, message_end, tool_end, agent_end."""

    type: str
    session_id: int
    role: str = ""
    delta: str = ""
    entry: Entry | None = None
    purpose: str = ""
    stage: str = ""  # which step of a longer generation, e.g. "part 2 of 5" of a handoff's notes
    caller: Entry | None = None  # tool_end: the reply whose call this result answers


Listener = Callable[[AgentEvent], Awaitable[None]]


class HandoffCancelled(Exception):
    def __init__(self) -> None:
        super().__init__(handoff.CANCELLED)


class HandoffFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Handoff failed: {reason}")
        self.reason = reason


@dataclass
class HandoffResult:
    document: str
    report: StructureReport
    reply: Entry
    new_session: ChatSession | None = None  # None while the user reviews the document (B14)


@dataclass
class _Reply:
    parts: list[str] = field(default_factory=list)  # the deltas: joined once, not per delta
    length: int = 0
    usage: Usage = field(default_factory=Usage)
    error_kind: str = ""
    thinking: list[str] = field(default_factory=list)
    signature: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str = ""

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

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


@dataclass
class Prepared:
    """What a reply is sent instead of the session's whole context, and what it records."""

    messages: list[dict[str, Any]] | None = None  # None: the context as it is
    data: dict[str, Any] = field(default_factory=dict)  # kept in the reply's entry
    failure: str = ""  # set: the reply fails with this reason, unsent


async def _noop(event: AgentEvent) -> None:
    return None


class AgentSession:
    def __init__(
        self,
        session: ChatSession,
        *,
        listener: Listener = _noop,
        provider: Provider | None = None,
        generation_id: str = "",
        on_delta: Callable[[str], None] | None = None,
        on_stream_end: Callable[[], Awaitable[None]] | None = None,
        on_thinking: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.provider = provider or get_provider(session.model)
        self.listener = listener
        # Streamed text goes here, synchronously (no task per delta), when given; else it is a
        # message_update event for the listener.
        self.on_delta = on_delta
        # Called when a reply's stream ends, before the reply is saved: text `on_delta` holds
        # back for its next batch goes out without waiting for the save.
        self.on_stream_end = on_stream_end
        self.on_thinking = on_thinking  # streamed thinking, as `on_delta` gets the text
        self.generation_id = generation_id
        self.messages: list[dict[str, Any]] = []
        self.todo_reminder_counter = 0
        self.is_streaming = False
        self._saver: asyncio.Task[None] | None = None  # saves the reply as it streams
        self._more = asyncio.Event()  # enough new text to save before the interval is up
        self.partial_purpose = ""
        self.partial_stage = ""
        self._stream_task: asyncio.Task[None] | None = None
        self._aborted = False
        self._abort_reason = "cancelled"
        self._keep = True  # False once the session's claim is lost: write nothing more
        self._saved_chars = 0  # how much of the reply the last partial save kept
        self._handoff_aborted: bool | None = None  # not None while a handoff generates

    # --- state -------------------------------------------------------------
    @property
    def session_id(self) -> int:
        return self.session.pk

    @property
    def is_replying(self) -> bool:
        """An assistant reply is streaming now."""
        return self._stream_task is not None

    @property
    def is_generating_handoff(self) -> bool:
        return self._handoff_aborted is not None

    async def load(self, *, before: Entry | None = None) -> None:
        """Make the session's context the active message list: as of its leaf (`self.session`
        as just read), or as before entry `before` (a prompt stored already).

        A long session's context costs a load of its whole branch; the last job of this
        process left it in CONTEXTS, good as long as the session's leaf has not moved since.
        """
        leaf = before.parent_id if before is not None else self.session.leaf_id
        cached = CONTEXTS.pop(self.session_id, None)
        if leaf is None:
            self.messages = []  # nothing written yet
        elif cached is not None and cached[0] == leaf:
            self.messages = cached[1]
        else:
            self.messages = await database_sync_to_async(store.session_context)(self.session, leaf)

    def keep_context(self) -> None:
        """Leave the context for this session's next job in this process (see `load`). Keyed by
        the leaf this agent's own writes left: if anything else wrote since, the next load
        sees another leaf and builds the context afresh."""
        CONTEXTS[self.session_id] = (self.session.leaf_id, self.messages)
        while len(CONTEXTS) > MAX_CONTEXTS:
            CONTEXTS.pop(next(iter(CONTEXTS)))

    # --- prompts -----------------------------------------------------------
    async def prompt(
        self,
        text: str,
        expand_prompt_templates: bool = True,
        *,
        purpose: str = "",
        prepare: Callable[[], Awaitable[Prepared]] | None = None,
        user: Entry | None = None,
    ) -> Entry | None:
        """Send a user message and stream the reply; returns the persisted reply.

        While a reply streams, the text is queued as a follow-up instead (and
        None is returned): prompts are never dropped and never run concurrently.
        `prepare`, run once the user message is in, may choose what the model is sent
        instead of the whole context (a handoff that must fit the window). `user` is the
        user message when the caller has stored it already (a job, with the turn it took).
        """
        if self.is_streaming:
            await self.follow_up(text)
            return None
        if expand_prompt_templates:
            text = await database_sync_to_async(store.expand_prompt_template)(self.session, text)
        self.is_streaming, self._aborted, self._abort_reason = True, False, "cancelled"
        try:
            await self._emit("agent_start", purpose=purpose)
            if user is None:
                user = await database_sync_to_async(store.append_message)(
                    self.session,
                    Entry.Role.USER,
                    [{"type": "text", "text": text}],
                    data={"purpose": purpose} if purpose else None,
                )
            add_to_context(self.messages, Entry.Role.USER, text)
            await self._emit("message_start", role=Entry.Role.USER, entry=user, purpose=purpose)
            await self._emit("message_end", role=Entry.Role.USER, entry=user, purpose=purpose)
            prepared = await prepare() if prepare else Prepared()
            if purpose:  # a handoff's request: no tools, no reminders
                _, reply = await self._reply(purpose, prepared)
            else:
                await self._notes_on_todos()
                reply = await self._answer()
            await self._emit("agent_end", entry=reply, purpose=purpose)
            return reply
        finally:
            self.is_streaming = False

    async def regenerate(self) -> Entry:
        """Another reply to the context as it is (its last message is the one to answer): a
        sibling of the reply it replaces, which stays on its own branch."""
        self.is_streaming, self._aborted, self._abort_reason = True, False, "cancelled"
        try:
            await self._emit("agent_start")
            reply = await self._answer(beside_others=True)
            await self._emit("agent_end", entry=reply)
            return reply
        finally:
            self.is_streaming = False

    async def follow_up(self, text: str) -> None:
        await database_sync_to_async(PendingPrompt.objects.create)(session=self.session, text=text)

    def abort(self, reason: str = "cancelled", *, keep: bool = True) -> bool:
        """Stop the reply; its partial text is kept as an aborted entry (unless `keep` is
        False: the session is no longer this process's to write to).

        An abort that comes before the reply starts streaming stops it from starting.
        """
        if not self.is_streaming:
            return False
        self._aborted, self._abort_reason, self._keep = True, reason, keep
        if self._stream_task is not None and not self._stream_task.done():
            self._stream_task.cancel()
        return True

    async def _answer(self, *, beside_others: bool = False) -> Entry:
        """The reply to the context, with the tool loop: while the model calls tools, run them,
        store their results and let it go on, for at most AGENTWEB_MAX_TOOL_ROUNDS rounds.
        A cancel stops the loop wherever it is; the model's last reply is returned."""
        request = [{"role": m["role"], "content": list(m["content"])} for m in self.messages]
        rounds = 0
        while True:
            reply, entry = await self._reply(
                "", Prepared(messages=request), beside_others=beside_others, tools=TOOLS
            )
            beside_others = False  # only the first reply stands beside the one it replaces
            if not reply.tool_calls or entry.status != Entry.Status.COMPLETE or not self._keep:
                return entry
            request.append(reply.request_message())
            request.append(await self._run_tools(reply.tool_calls, entry))
            rounds += 1
            if self._aborted:
                return entry
            if rounds >= settings.AGENTWEB_MAX_TOOL_ROUNDS:
                limit = await database_sync_to_async(store.append_custom)(
                    self.session, TOOL_LIMIT, TOOL_LIMIT_TEXT.format(rounds=rounds)
                )
                await self._emit("message_end", role="", entry=limit)
                return entry

    async def _run_tools(self, calls: list[ToolCall], caller: Entry) -> dict[str, Any]:
        """Run the reply's tool calls; each result is stored as a toolResult message (and put in
        the context); returns the results as the next request's user message."""
        blocks: list[dict[str, Any]] = []
        for call in calls:
            result = run_tool(call)
            entry = await database_sync_to_async(store.append_tool_result)(
                self.session, call.id, call.name, result.text, is_error=result.is_error,
                details=result.details,
            )  # fmt: skip
            self._remember(entry)
            await self._emit("tool_end", role=Entry.Role.TOOL_RESULT, entry=entry, caller=caller)
            block = {"type": "tool_result", "tool_use_id": call.id, "content": result.text}
            blocks.append({**block, "is_error": True} if result.is_error else block)
        return {"role": USER, "content": blocks}

    async def _notes_on_todos(self) -> None:
        """Before a turn: tell the model of the user's change to the todo list, or remind it of
        items that stayed open (each a `custom_message` the page shows as a small note)."""
        notes = await database_sync_to_async(_todo_notes)(self.session)
        for entry in notes:
            self._remember(entry)
            await self._emit("message_end", role="", entry=entry)

    def _remember(self, entry: Entry) -> None:
        """Put a stored entry in the context, as a fresh build of the branch would have it."""
        for part in context.entry_parts(entry):
            add_to_context(self.messages, part.role, part.text)

    async def _reply(
        self,
        purpose: str,
        prepared: Prepared,
        *,
        beside_others: bool = False,
        tools: Sequence[dict[str, Any]] = (),
    ) -> tuple[_Reply, Entry]:
        reply = _Reply()
        self.partial_purpose, self.partial_stage = purpose, ""
        await self._emit("message_start", role=Entry.Role.ASSISTANT, purpose=purpose)
        messages = self.messages if prepared.messages is None else prepared.messages
        # A reply thinks at the session's level; a handoff's document streams at once.
        budget = 0 if purpose else thinking.budget(self.session.thinking_level)
        status, error, outer_cancelled = await self._stream(
            reply, messages, prepared.failure, thinking_budget=budget, tools=tools
        )
        if self.on_stream_end is not None:
            await asyncio.shield(self.on_stream_end())
        if status == Entry.Status.COMPLETE and not reply.text.strip() and not reply.tool_calls:
            status, error = Entry.Status.FAILED, handoff.NO_TEXT
        fields: dict[str, Any] = {
            "status": status,
            "error": error,
            "model": self.provider.model,
            "input_tokens": reply.usage.input_tokens,
            "output_tokens": reply.usage.output_tokens,
            "cache_read_tokens": reply.usage.cache_read_tokens,
            "cache_write_tokens": reply.usage.cache_write_tokens,
            "data": {**({"purpose": purpose} if purpose else {}), **prepared.data},
        }
        content = reply.content()
        await self._settle_partial()
        if not self._keep:  # the claim was lost: whoever took over keeps the saved partial
            await self._emit("message_end", role=Entry.Role.ASSISTANT, purpose=purpose)
            return reply, Entry(kind=Entry.Kind.MESSAGE, role=Entry.Role.ASSISTANT, **fields)
        save = database_sync_to_async(store.append_message)(
            self.session, Entry.Role.ASSISTANT, content, with_siblings=beside_others, **fields
        )
        # The final save must happen even when this task is being cancelled.
        entry = await asyncio.shield(save)
        self._remember(entry)
        await self._emit("message_end", role=Entry.Role.ASSISTANT, entry=entry, purpose=purpose)
        if outer_cancelled:
            raise asyncio.CancelledError
        return reply, entry

    async def _stream(
        self,
        reply: _Reply,
        messages: list[dict[str, Any]],
        failure: str = "",
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> tuple[str, str, bool]:
        """Stream one model call into `reply`, as a task an abort can cancel.

        Returns (status, error, cancelled from outside): whatever happens, the text so far
        is in `reply` for the caller to keep.
        """
        if failure:
            return Entry.Status.FAILED, failure, False
        self._stream_task = asyncio.create_task(
            self._consume(reply, messages, max_tokens, thinking_budget, tools)
        )
        if self._aborted:  # cancelled before the reply began
            self._stream_task.cancel()
        try:
            await self._stream_task
        except asyncio.CancelledError:
            outer_cancelled = not self._aborted or _current_task_cancelling()
            reason = "interrupted" if outer_cancelled else self._abort_reason
            return Entry.Status.ABORTED, reason, outer_cancelled
        except ProviderError as exc:
            reply.error_kind = exc.kind
            return Entry.Status.FAILED, exc.reason, False
        except Exception as exc:  # a runtime error must not lose the partial text
            log.exception("generation failed in session %s", self.session_id)
            return Entry.Status.FAILED, f"{type(exc).__name__}: {exc}", False
        finally:
            self._stream_task = None
        return Entry.Status.COMPLETE, "", False

    async def _consume(
        self,
        reply: _Reply,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        thinking_budget: int = 0,
        tools: Sequence[dict[str, Any]] = (),
    ) -> None:
        self._saved_chars = 0
        stream = self.provider.stream(
            messages, max_tokens=max_tokens, thinking_budget=thinking_budget, tools=tools
        )
        async for event in stream:
            if isinstance(event, ThinkingDelta):
                reply.thinking.append(event.text)
                reply.signature = event.signature or reply.signature
                if event.text and self.on_thinking is not None:
                    self.on_thinking(event.text)
            elif isinstance(event, TextDelta):
                reply.add(event.text)
                if self.on_delta is not None:
                    self.on_delta(event.text)  # synchronous: an abort cannot cut it in half
                else:
                    # Shielded: an abort cancels this task, but never halfway through telling
                    # the listeners about a delta (they would see a gap in the stream).
                    await asyncio.shield(
                        self._emit("message_update", role=Entry.Role.ASSISTANT, delta=event.text)
                    )
                if self._saver is None:
                    self._saver = asyncio.create_task(self._keep_saving(reply))
                elif reply.length - self._saved_chars >= settings.AGENTWEB_PARTIAL_SAVE_CHARS:
                    self._more.set()
            elif isinstance(event, ToolCall):
                reply.tool_calls.append(event)
            elif isinstance(event, StreamEnd):
                reply.usage, reply.stop_reason = event.usage, event.stop_reason

    async def _keep_saving(self, reply: _Reply) -> None:
        """Keep the reply so far in the session row every few seconds (or every few thousand
        characters), so a crash keeps it (SPEC B12). The stream never waits for it; the one
        database thread runs these saves before the final one, which clears it."""
        save = database_sync_to_async(store.save_partial)
        while True:
            with contextlib.suppress(TimeoutError):
                wait = max(0.05, settings.AGENTWEB_PARTIAL_SAVE_SECONDS)
                await asyncio.wait_for(self._more.wait(), wait)
            self._more.clear()
            if reply.length > self._saved_chars and self._keep:
                text = reply.text
                self._saved_chars = len(text)
                await save(self.session, text, self.partial_purpose, self.provider.model)

    async def _settle_partial(self) -> None:
        """Stop saving the reply as it streams: the final save comes next."""
        if self._saver is not None:
            self._saver.cancel()
        self._saver, self._saved_chars = None, 0

    # --- handoff -----------------------------------------------------------
    async def handoff(self, focus: str = "") -> HandoffResult:
        """Generate a handoff document and switch to a new session seeded with it only.

        Raises NothingToHandOff, HandoffCancelled or HandoffFailed; on success the
        agent is bound to the new session (unless the user reviews first, B14).
        """
        branch = await database_sync_to_async(store.get_branch)(self.session)
        handoff.check_guard(store.count_messages(branch))
        self._handoff_aborted = False
        todo_list = (await database_sync_to_async(todos.state)(self.session)).todos
        prompt_text = handoff.build_prompt(focus, todos.for_handoff(todo_list))
        context_before = self.session.context_tokens
        try:
            reply = await self.prompt(
                prompt_text,
                expand_prompt_templates=False,
                purpose="handoff",
                prepare=lambda: self._handoff_request(branch, prompt_text, context_before),
            )
            reply, document = self._document_of(reply)
            reply, document = await self._guard_coverage(branch, reply, document)
            report = handoff.check_structure(document)
            result = HandoffResult(document=document, report=report, reply=reply)
            if await database_sync_to_async(_preference)(self.session, "review_handoff"):
                return result
            try:
                result.new_session = await self.switch(reply, document)
            except Exception as exc:
                log.exception("handoff switch failed in session %s", self.session_id)
                raise await switch_failed(self.session, exc) from exc
            return result
        finally:
            self._handoff_aborted = None

    async def _guard_coverage(
        self, branch: list[Entry], reply: Entry, document: str
    ) -> tuple[Entry, str]:
        """Before the switch: the salient items the document dropped are carried over anyway.

        By default agentweb appends them in a section of its own. With the preference, and
        Claude, the model gets one more streamed round to work them in; whatever it still
        leaves out is appended. Returns the reply the document comes from, and the document.
        """
        cwd = self.session.cwd
        report = await asyncio.to_thread(coverage.coverage, branch, document, cwd)
        before, dropped, amended = report.summary(), report.salient_dropped, False
        amend = dropped and not self.provider.spec.is_local
        if amend and await database_sync_to_async(_preference)(self.session, "amend_handoff"):
            reply, document = await self._amend(document, dropped)
            report = await asyncio.to_thread(coverage.coverage, branch, document, cwd)
            dropped, amended = report.salient_dropped, True
        addendum = handoff.also_carried_over(dropped, report.total_entries)
        for item in dropped[: handoff.MAX_CARRIED_OVER]:
            item.carried = True
        record = {
            "before": before,
            "after": report.summary(),
            "added": min(len(dropped), handoff.MAX_CARRIED_OVER),
            "amended": amended,
        }
        await database_sync_to_async(_record_coverage)(reply, record)
        return reply, f"{document}\n\n{addendum}" if addendum else document

    async def _amend(self, document: str, dropped: list[Item]) -> tuple[Entry, str]:
        """One streamed, cancellable round that asks the model to work dropped items in."""
        request = handoff.amend_request(document, dropped)
        only = [{"role": USER, "content": [{"type": "text", "text": request}]}]
        reply = await self.prompt(
            request,
            expand_prompt_templates=False,
            purpose="handoff",
            prepare=lambda: _prepared(only, {"amendment": True, "fitted": True}),
        )
        return self._document_of(reply)

    def _document_of(self, reply: Entry | None) -> tuple[Entry, str]:
        """The document a handoff reply holds (H6), or why there is none.

        Either abort (the handoff's or the generic one) means cancelled: an aborted reply's
        partial document never reaches a new session (B11).
        """
        if reply is None or self._handoff_aborted or reply.status == Entry.Status.ABORTED:
            raise HandoffCancelled
        if reply.status == Entry.Status.FAILED:
            raise HandoffFailed(reply.error)
        document = handoff.extract_document([reply])
        if not document.strip():
            raise HandoffFailed(handoff.NO_TEXT)
        return reply, document

    async def _handoff_request(
        self, branch: list[Entry], prompt_text: str, context_before: int
    ) -> Prepared:
        """The handoff's request, made to fit the model's window (see window.py)."""
        record: dict[str, Any] = {"context_before": context_before}
        try:
            plan = await window.fit(context.context_parts(branch), prompt_text, self.provider)
            notes = await self._take_notes(plan, prompt_text) if plan.chunks else ""
        except ProviderError as error:
            return Prepared(data={"handoff": record}, failure=error.reason)
        record.update(fitted=plan.report(), budget=self.provider.spec.budget)
        if plan.report():
            record["sent_tokens"] = plan.size(prompt_text, notes)
        intro = handoff.notes_intro(notes, len(plan.chunks), self.provider.spec.label)
        return Prepared(
            messages=plan.messages(prompt_text, intro if notes else ""),
            data={"handoff": record, **({"fitted": True} if plan.report() else {})},
        )

    async def _take_notes(self, plan: window.Plan, prompt_text: str) -> str:
        """Notes on each stretch the plan could not send whole, streamed like a reply.

        Each stretch's notes are kept in the session as a `handoff_notes` entry. Notes too
        long for the final request are themselves summarised, at most three rounds deep.
        Returns "" when cancelled (the reply that follows sees the abort).
        """
        room = max(1, self.provider.spec.budget - plan.size(prompt_text) - 64)
        limit = window.chunk_budget(self.provider.spec.budget, handoff.NOTES_PROMPT)
        chunks = list(plan.chunks)
        joined = ""
        for depth in range(3):
            per_chunk = max(256, min(self.provider.spec.max_output, room // len(chunks)))
            notes: list[str] = []
            index = 0
            while index < len(chunks):
                text = await self._notes_on(chunks, index, per_chunk, depth)
                if self._aborted:
                    return ""
                if text is not None:
                    notes.append(f"### Part {index + 1} of {len(chunks)}\n\n{text}")
                    index += 1
            joined = "\n\n".join(notes)
            if math.ceil(context.estimate_tokens(joined) * plan.scale) <= room:
                return joined
            notes_parts = [context.Part(USER, note, "notes") for note in notes]
            chunks = window.rechunk(notes_parts, limit, plan.scale)
        return context.excerpt(joined, int(room * 3 / plan.scale))

    async def _notes_on(
        self, chunks: list[list[context.Part]], index: int, max_tokens: int, depth: int
    ) -> str | None:
        """Stream the notes on one stretch. None: the model found it too long, so it was split
        in two in `chunks` (take the notes again at the same index)."""
        chunk = chunks[index]
        request = [
            {
                "role": USER,
                "content": [
                    {
                        "type": "text",
                        "text": handoff.notes_request(
                            context.serialize(chunk), index + 1, len(chunks), depth
                        ),
                    }
                ],
            }
        ]
        stage = f"part {index + 1} of {len(chunks)}"
        reply = _Reply()
        self.partial_purpose, self.partial_stage = NOTES, stage
        await self._emit("message_start", role=ASSISTANT, purpose=NOTES, stage=stage)
        status, error, outer_cancelled = await self._stream(reply, request, max_tokens=max_tokens)
        if reply.error_kind == "too_long" and not reply.text:
            chunks[index : index + 1] = window.split(chunk)
            await self._emit("message_end", role=ASSISTANT, purpose=NOTES)
            return None
        await self._settle_partial()
        if not self._keep:  # the claim was lost
            await self._emit("message_end", role=ASSISTANT, purpose=NOTES)
            return ""
        save = database_sync_to_async(store.append_custom)(
            self.session,
            NOTES,
            reply.text,
            data={"part": index + 1, "parts": len(chunks), "round": depth + 1},
            status=status,
            error=error,
        )
        entry = await asyncio.shield(save)
        await self._emit("message_end", role=ASSISTANT, entry=entry, purpose=NOTES)
        if outer_cancelled:
            raise asyncio.CancelledError
        if status == Entry.Status.FAILED:
            raise ProviderError(error)
        return reply.text

    def abort_handoff(self) -> bool:
        if self._handoff_aborted is None:
            return False
        self._handoff_aborted = True
        return self.abort()

    async def switch(self, reply: Entry, document: str) -> ChatSession:
        """Start the new session with the document, then rebind this agent to it (H8–H10)."""
        content = handoff.wrap(document)
        record = reply.data.get("handoff", {})
        data = {
            "warnings": handoff.check_structure(document).warnings(),
            "fitted": record.get("fitted", []),
            "coverage": record.get("coverage", {}),
            "context_tokens_before": record.get("context_before", self.session.context_tokens),
            "context_tokens_after": estimate_tokens(content),
        }
        new = await database_sync_to_async(store.hand_off)(
            self.session,
            from_entry=reply,
            content=content,
            data=data,
            generation_id=self.generation_id,
        )
        self.session = new
        self.todo_reminder_counter = 0
        await self.load()
        return new

    async def _emit(self, type_: str, **fields: Any) -> None:
        await self.listener(AgentEvent(type_, self.session_id, **fields))


async def switch_failed(session: ChatSession, exc: Exception) -> HandoffFailed:
    """A switch that raised created nothing (B6): say why, and keep a record of it (B13)."""
    failed = HandoffFailed(str(exc) or type(exc).__name__)
    await database_sync_to_async(store.append_custom)(session, "handoff_failed", str(failed))
    return failed


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)


def run_tool(call: ToolCall) -> ToolResult:
    """Run one of the agent's tools. Bad input is an error result the model can correct, never
    an exception: a tool call cannot stop the generation."""
    if call.name != todos.TOOL_NAME:
        return ToolResult(f"Unknown tool {call.name!r}: the tools are {todos.TOOL_NAME}.", True)
    if call.arguments is None:
        return ToolResult(f"The input is not valid JSON: {call.raw[:200]!r}", True)
    try:
        items = todos.parse_input(call.arguments)
    except todos.TodoInputError as error:
        return ToolResult(f"The todo list was not changed: {error}.", True)
    return ToolResult(todos.result_text(items), details={"todos": todos.as_dicts(items)})


def _todo_notes(session: ChatSession) -> list[Entry]:
    """The notes on the todo list the model needs before its turn (stored, so they follow the
    branch and are exported): the user's change to the list, or a reminder of open items."""
    state = todos.state(session)
    notes = []
    if state.unseen_user_change:
        notes.append(
            store.append_custom_message(
                session, todos.NOTE_TYPE, todos.note_text(state.todos), display=True
            )
        )
    elif todos.reminder_due(state):
        text = todos.reminder_text(state.todos, state.turns_since_update)
        notes.append(store.append_custom_message(session, todos.REMINDER_TYPE, text, display=True))
    return notes


def _preference(session: ChatSession, name: str) -> bool:
    """The owner's yes/no preference ``name`` (off when they never saved any)."""
    prefs = Preferences.objects.filter(user_id=session.owner_id).first()
    return bool(prefs and getattr(prefs, name))


def _record_coverage(reply: Entry, record: dict[str, Any]) -> None:
    """Keep the coverage before and after on the reply the document comes from."""
    reply.data = {**reply.data, "handoff": {**reply.data.get("handoff", {}), "coverage": record}}
    Entry.objects.filter(pk=reply.pk).update(data=reply.data)


async def _prepared(messages: list[dict[str, Any]], data: dict[str, Any]) -> Prepared:
    return Prepared(messages=messages, data=data)


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return bool(task and task.cancelling())


__all__ = [
    "AgentEvent",
    "AgentSession",
    "HandoffCancelled",
    "HandoffFailed",
    "HandoffResult",
    "NothingToHandOff",
]
