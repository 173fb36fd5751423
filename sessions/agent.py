"""AgentSession: the runtime around one chat session (the reference agent's agent-session).

It owns the active LLM message list, streams replies from a provider, persists
them at message end, and emits the reference agent's events. `handoff()`
generates the handoff document through the normal prompt path and switches the
agent to the new session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from . import handoff, store
from .context import add_to_context, estimate_tokens
from .handoff import NothingToHandOff, StructureReport
from .models import ChatSession, Entry, PendingPrompt, Preferences
from .providers import Provider, ProviderError, StreamEnd, TextDelta, Usage, get_provider

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentEvent:
    """One of agent_start, message_start, message_update, message_end, agent_end."""

    type: str
    session_id: int
    role: str = ""
    delta: str = ""
    entry: Entry | None = None
    purpose: str = ""


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
    text: str = ""
    usage: Usage = field(default_factory=Usage)


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
    ) -> None:
        self.session = session
        self.provider = provider or get_provider(session.model)
        self.listener = listener
        self.generation_id = generation_id
        self.messages: list[dict[str, Any]] = []
        self.todo_reminder_counter = 0
        self.is_streaming = False
        self.partial_text = ""
        self.partial_purpose = ""
        self._stream_task: asyncio.Task[None] | None = None
        self._aborted = False
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

    async def load(self) -> None:
        """Make the session's context the active message list."""
        self.messages = await database_sync_to_async(store.session_context)(self.session)

    # --- prompts -----------------------------------------------------------
    async def prompt(
        self, text: str, expand_prompt_templates: bool = True, *, purpose: str = ""
    ) -> Entry | None:
        """Send a user message and stream the reply; returns the persisted reply.

        While a reply streams, the text is queued as a follow-up instead (and
        None is returned): prompts are never dropped and never run concurrently.
        """
        if self.is_streaming:
            await self.follow_up(text)
            return None
        if expand_prompt_templates:
            text = await database_sync_to_async(store.expand_prompt_template)(self.session, text)
        self.is_streaming, self._aborted = True, False
        try:
            await self._emit("agent_start", purpose=purpose)
            user = await database_sync_to_async(store.append_message)(
                self.session,
                Entry.Role.USER,
                [{"type": "text", "text": text}],
                data={"purpose": purpose} if purpose else None,
            )
            add_to_context(self.messages, Entry.Role.USER, text)
            await self._emit("message_start", role=Entry.Role.USER, entry=user, purpose=purpose)
            await self._emit("message_end", role=Entry.Role.USER, entry=user, purpose=purpose)
            reply = await self._reply(purpose)
            await self._emit("agent_end", entry=reply, purpose=purpose)
            return reply
        finally:
            self.is_streaming = False

    async def follow_up(self, text: str) -> None:
        await database_sync_to_async(PendingPrompt.objects.create)(session=self.session, text=text)

    def abort(self) -> bool:
        """Stop the reply; its partial text is kept as an aborted entry.

        An abort that comes before the reply starts streaming stops it from starting.
        """
        if not self.is_streaming:
            return False
        self._aborted = True
        if self._stream_task is not None and not self._stream_task.done():
            self._stream_task.cancel()
        return True

    async def _reply(self, purpose: str) -> Entry:
        reply = _Reply()
        self.partial_text, self.partial_purpose = "", purpose
        await self._emit("message_start", role=Entry.Role.ASSISTANT, purpose=purpose)
        self._stream_task = asyncio.create_task(self._consume(reply))
        if self._aborted:  # cancelled before the reply began
            self._stream_task.cancel()
        status, error = Entry.Status.COMPLETE, ""
        outer_cancelled = False
        try:
            await self._stream_task
        except asyncio.CancelledError:
            outer_cancelled = not self._aborted or _current_task_cancelling()
            status, error = Entry.Status.ABORTED, "cancelled"
            if outer_cancelled:
                error = "interrupted"
        except ProviderError as exc:
            status, error = Entry.Status.FAILED, exc.reason
        except Exception as exc:  # a runtime error must not lose the partial text
            log.exception("generation failed in session %s", self.session_id)
            status, error = Entry.Status.FAILED, f"{type(exc).__name__}: {exc}"
        finally:
            self._stream_task = None
        if status == Entry.Status.COMPLETE and not reply.text.strip():
            status, error = Entry.Status.FAILED, handoff.NO_TEXT
        save = database_sync_to_async(store.append_message)(
            self.session,
            Entry.Role.ASSISTANT,
            [{"type": "text", "text": reply.text}] if reply.text else [],
            status=status,
            error=error,
            model=self.provider.model,
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            data={"purpose": purpose} if purpose else None,
        )
        # The final save must happen even when this task is being cancelled.
        entry = await asyncio.shield(save)
        self.partial_text = ""
        if status != Entry.Status.FAILED:
            add_to_context(self.messages, Entry.Role.ASSISTANT, reply.text)
        await self._emit("message_end", role=Entry.Role.ASSISTANT, entry=entry, purpose=purpose)
        if outer_cancelled:
            raise asyncio.CancelledError
        return entry

    async def _consume(self, reply: _Reply) -> None:
        async for event in self.provider.stream(self.messages):
            if isinstance(event, TextDelta):
                reply.text += event.text
                self.partial_text = reply.text
                # Shielded: an abort cancels this task, but never halfway through telling
                # the listeners about a delta (they would see a gap in the stream).
                await asyncio.shield(
                    self._emit("message_update", role=Entry.Role.ASSISTANT, delta=event.text)
                )
            elif isinstance(event, StreamEnd):
                reply.usage = event.usage

    # --- handoff -----------------------------------------------------------
    async def handoff(self, focus: str = "") -> HandoffResult:
        """Generate a handoff document and switch to a new session seeded with it only.

        Raises NothingToHandOff, HandoffCancelled or HandoffFailed; on success the
        agent is bound to the new session (unless the user reviews first, B14).
        """
        branch = await database_sync_to_async(store.get_branch)(self.session)
        handoff.check_guard(store.count_messages(branch))
        self._handoff_aborted = False
        try:
            reply = await self.prompt(
                handoff.build_prompt(focus), expand_prompt_templates=False, purpose="handoff"
            )
            # Either abort (the handoff's or the generic one) means cancelled:
            # an aborted reply's partial document never reaches a new session (B11).
            if reply is None or self._handoff_aborted or reply.status == Entry.Status.ABORTED:
                raise HandoffCancelled
            if reply.status == Entry.Status.FAILED:
                raise HandoffFailed(reply.error)
            document = handoff.extract_document([reply])
            if not document.strip():
                raise HandoffFailed(handoff.NO_TEXT)
            report = handoff.check_structure(document)
            result = HandoffResult(document=document, report=report, reply=reply)
            if await database_sync_to_async(_wants_review)(self.session):
                return result
            try:
                result.new_session = await self.switch(reply, document)
            except Exception as exc:  # nothing was created (B6); say so and keep a record (B13)
                log.exception("handoff switch failed in session %s", self.session_id)
                reason = str(exc) or type(exc).__name__
                await database_sync_to_async(store.append_custom)(
                    self.session, "handoff_failed", f"Handoff failed: {reason}"
                )
                raise HandoffFailed(reason) from exc
            return result
        finally:
            self._handoff_aborted = None

    def abort_handoff(self) -> bool:
        if self._handoff_aborted is None:
            return False
        self._handoff_aborted = True
        return self.abort()

    async def switch(self, reply: Entry, document: str) -> ChatSession:
        """Start the new session with the document, then rebind this agent to it (H8–H10)."""
        content = handoff.wrap(document)
        data = {
            "warnings": handoff.check_structure(document).warnings(),
            "context_tokens_before": self.session.context_tokens,
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


def _wants_review(session: ChatSession) -> bool:
    prefs = Preferences.objects.filter(user_id=session.owner_id).first()
    return bool(prefs and prefs.review_handoff)


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
