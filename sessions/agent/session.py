"""AgentSession: the runtime around one chat session (the reference agent's agent-session).

It owns the active LLM message list (the kept context), sends prompts through the reply
streamer and the tool loop, emits the reference agent's events, and runs `/handoff`, after
which it is bound to the new session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from foundation.database import short

from .. import attachments, context, store, todos
from ..context import add_part, add_to_context, entry_parts
from ..models import ChatSession, Entry, PendingPrompt, Preferences, PromptTemplate
from ..providers import Provider
from .approvals import Approvals
from .events import AgentEvent, Listener, ignore
from .handoff_run import HandoffResult, HandoffRun
from .handoff_switch import switch
from .provider import provider_for
from .streamer import Prepared, Streamer
from .tools import Tool, ToolLoop, offered_tools

# The context a job leaves for the next job of its session: (leaf id, messages), newest last.
CONTEXTS: dict[int, tuple[int | None, list[dict[str, Any]]]] = {}
MAX_CONTEXTS = 64


class AgentSession:
    def __init__(
        self,
        session: ChatSession,
        *,
        listener: Listener = ignore,
        provider: Provider | None = None,
        generation_id: str = "",
        on_delta: Callable[[str], None] | None = None,
        on_stream_end: Callable[[], Awaitable[None]] | None = None,
        on_thinking: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.provider = provider or provider_for(session.model)
        self.listener = listener
        self.generation_id = generation_id
        self.messages: list[dict[str, Any]] = []
        self.streamer = Streamer(
            self.provider,
            self.emit,
            self.remember,
            on_delta=on_delta,
            on_thinking=on_thinking,
            on_stream_end=on_stream_end,
        )
        self.handoff_run: HandoffRun | None = None  # while /handoff runs
        self.proposed_handoff: str | None = None  # the focus of a handoff the model proposed
        self.approvals = Approvals()  # the questions a tool call asks the user

    # --- state -------------------------------------------------------------
    @property
    def session_id(self) -> int:
        return self.session.pk

    @property
    def is_streaming(self) -> bool:
        """A turn is under way (a prompt, a regeneration, a handoff's request)."""
        return self.streamer.active

    @property
    def is_generating_handoff(self) -> bool:
        return self.handoff_run is not None

    async def load(self, *, before: Entry | None = None) -> None:
        """Make the session's context the active message list: as of its leaf (`self.session`
        as just read), or as before entry `before` (a prompt stored already).

        A long session's context costs a load of its whole branch; the last job of this
        process left it in CONTEXTS, good as long as the session's leaf has not moved since.
        """
        self.streamer.system = await instructions_of(self.session)
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

    def remember(self, entry: Entry) -> None:
        """Put a stored entry in the context, as a fresh build of the branch would have it."""
        for part in context.entry_parts(entry):
            add_to_context(self.messages, part.role, part.text)

    async def take_in(self, user: Entry) -> None:
        """Put the user's message in the context: its files read from the storage (off the
        event loop) when it has any."""
        parts = entry_parts(user)
        if any(part.attachment is not None for part in parts):
            files = attachments.reader(self.session.owner_id)

            def add() -> None:
                for part in parts:
                    add_part(self.messages, part, files)

            await database_sync_to_async(add)()
            return
        for part in parts:
            add_to_context(self.messages, part.role, part.text)

    async def emit(self, type_: str, **fields: Any) -> None:
        await self.listener(AgentEvent(type_, self.session_id, **fields))

    # --- prompts -----------------------------------------------------------
    async def prompt(
        self,
        text: str,
        expand_prompt_templates: bool = True,
        *,
        purpose: str = "",
        prepare: Callable[[], Awaitable[Prepared]] | None = None,
        user: Entry | None = None,
        ready: TurnStart | None = None,
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
            expand = database_sync_to_async(PromptTemplate.expand)
            text = await expand(self.session.owner_id, text)
        self.streamer.begin()
        try:
            await self.emit("agent_start", purpose=purpose)
            if user is None:
                user = await database_sync_to_async(self.session.append_message)(
                    Entry.Role.USER,
                    [{"type": "text", "text": text}],
                    data={"purpose": purpose} if purpose else {},
                )
            if not purpose:  # a handoff's request is sent as `prepare` says, never kept
                await self.take_in(user)  # the text, its files, and a pointer per mention
            await self.emit("message_start", role=Entry.Role.USER, entry=user, purpose=purpose)
            await self.emit("message_end", role=Entry.Role.USER, entry=user, purpose=purpose)
            prepared = await prepare() if prepare else Prepared()
            if purpose:  # a handoff's request: no tools, no reminders
                _, reply = await self.streamer.reply(self.session, purpose, self.messages, prepared)
            else:
                tools = await self._before_the_turn(ready)
                loop = self._tool_loop()
                reply = await loop.answer(tools=tools)
                self.proposed_handoff = loop.proposed_handoff
            await self.emit("agent_end", entry=reply, purpose=purpose)
            return reply
        finally:
            self.streamer.end()

    async def regenerate(self) -> Entry:
        """Another reply to the context as it is (its last message is the one to answer): a
        sibling of the reply it replaces, which stays on its own branch."""
        self.streamer.begin()
        try:
            await self.emit("agent_start")
            reply = await self._tool_loop().answer(beside_others=True)
            await self.emit("agent_end", entry=reply)
            return reply
        finally:
            self.streamer.end()

    async def go_on(self) -> Entry:
        """The reply at the leaf stopped at its maximum length: the model goes on with it (its
        text so far ends the request, as the start of the model's own turn; the API refuses
        one that ends in white space, and thinking first). What it writes is a reply of its
        own after that one, which the context joins to it."""
        self.streamer.begin()
        try:
            await self.emit("agent_start")
            *before, last = self.messages
            start = [{**block} for block in last["content"]]
            if start and start[-1].get("type") == "text":
                start[-1]["text"] = start[-1]["text"].rstrip()
            messages = [*before, {"role": last["role"], "content": start}]
            leaf = self.session.leaf_id
            going_on = Prepared(data={"continues": leaf}, thinks=False)
            _, reply = await self.streamer.reply(self.session, "", messages, going_on)
            await self.emit("agent_end", entry=reply)
            return reply
        finally:
            self.streamer.end()

    def _tool_loop(self) -> ToolLoop:
        return ToolLoop(
            self.session, self.streamer, self.emit, self.messages,
            approvals=self.approvals, generation_id=self.generation_id,
        )  # fmt: skip

    async def follow_up(self, text: str) -> None:
        await database_sync_to_async(PendingPrompt.objects.create)(session=self.session, text=text)

    def abort(self, reason: str = "cancelled", *, keep: bool = True) -> bool:
        """Stop the reply; its partial text is kept as an aborted entry (unless `keep` is
        False: the session is no longer this process's to write to)."""
        return self.streamer.abort(reason, keep=keep)

    def cancel(self) -> None:
        """The user's Cancel: the handoff that runs (its run stops for good), or the reply."""
        if self.handoff_run is not None:
            self.handoff_run.cancel()
        else:
            self.streamer.abort()

    async def _before_the_turn(self, ready: TurnStart | None) -> tuple[Tool, ...]:
        """Before a turn: tell the model of the user's change to the todo list, or remind it of
        items that stayed open (each a `custom_message` the page shows as a small note); the
        tools the session offers. Read in one short database call unless `ready` has them."""
        if ready is None:
            ready = await short(turn_start)(self.session)
        for entry in ready.notes:
            self.remember(entry)
            await self.emit("message_end", role="", entry=entry)
        return ready.tools

    # --- handoff -----------------------------------------------------------
    async def handoff(
        self, focus: str = "", *, model: str = "", automatic: bool = False, in_place: bool = False
    ) -> HandoffResult:
        """Generate a handoff document and switch to a new session seeded with it only, on
        `model` ("": this session's); `automatic`: the threshold's, not the user's; `in_place`:
        /compact, the session itself goes on from the document.

        Raises NothingToHandOff, HandoffCancelled or HandoffFailed; on success the
        agent is bound to the new session (unless the user reviews first, B14).
        """
        self.handoff_run = HandoffRun(self, focus, model, automatic=automatic, in_place=in_place)
        try:
            result = await self.handoff_run.run()
        finally:
            self.handoff_run = None
        if result.new_session is not None:
            await self._bind(result.new_session)
        return result

    async def switch(self, reply: Entry, document: str, model: str = "") -> ChatSession:
        """Start the new session with the (reviewed) document, on `model` ("": as the handoff
        chose), then rebind to it (H8–H10)."""
        new = await switch(self.session, reply, document, self.generation_id, model)
        await self._bind(new)
        return new

    async def _bind(self, new: ChatSession) -> None:
        """H8, H10: the agent goes on in the new session, its context that session's."""
        self.session = new
        await self.load()


@dataclass(frozen=True)
class TurnStart:
    """What comes before a prompt's turn: the notes on the todo list the model is told of
    (stored already) and the tools the session offers."""

    notes: list[Entry]
    tools: tuple[Tool, ...]


def turn_start(session: ChatSession) -> TurnStart:
    """The notes due before a turn, stored, and the tools offered: bounded reads and a note's
    append, so a prompt's own database call can take them with it (generation/turns.py)."""
    return TurnStart(todos.notes_due(session), offered_tools(session))


async def instructions_of(session: ChatSession) -> str:
    """Every request's system prompt: the owner's custom instructions (as the claim read them:
    no query then), then the session's own."""
    if hasattr(session, "owner_instructions"):
        owners = session.owner_instructions or ""
    else:
        read = database_sync_to_async(Preferences.of_owner)
        owners = await read(session, "instructions", "owner_instructions") or ""
    return "\n\n".join(part for part in (owners, session.instructions) if part)
