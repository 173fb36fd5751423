"""The job: one generation run in the process that claimed the session (a handoff and/or the
queued prompts, turn by turn), its claim kept alive, its events relayed to every tab.

A job is an asyncio task of its process, not of a socket: closing a tab stops nothing (B7).
It listens on a channel of its own, so a Cancel or a snapshot request from any tab of any
process reaches it.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from channels.db import database_sync_to_async

from foundation.database import short, until_it_answers

from .. import handoff, handoff_review, tabs, titles, transcript
from ..agent import (
    AgentEvent,
    AgentSession,
    HandoffCancelled,
    HandoffFailed,
    HandoffResult,
    NothingToHandOff,
)
from ..models import ChatSession, Entry, Preferences
from .claims import leases, set_kind
from .events import (
    EntryAdded,
    Live,
    Notice,
    QuestionShown,
    Render,
    ReviewOffered,
    SidebarChanged,
    StatusShown,
    Switched,
    TitleChanged,
    ToolAnswered,
    ToolProgress,
)
from .relay import Relay
from .turns import AUTO_HANDOFF, Turn, next_turn, release_and_status

log = logging.getLogger(__name__)

FAILED = (
    "agentweb failed while answering (the server's log has the error): your message is kept in "
    "the session; send it again to retry."
)
SAVING = (
    "Saving… the database is not answering: the reply is kept here and saved as soon as it answers."
)
ENDED = Notice("", "info")  # an empty notice: the one the tabs show has ended
COMPACTED = "Compacted: this session goes on from the document, shown where the divider is."
AUTO_COMPACT = (
    "The next message would fill the context window past your automatic handoff setting: "
    "compacting first (Cancel sends it without compacting)."
)
RUNNING: dict[str, asyncio.Task[None]] = {}  # strong references: running jobs of this process


class Job:
    def __init__(
        self,
        session: ChatSession,
        generation_id: str,
        channel: str,
        render: Render,
        *,
        turn: Turn | None = None,
    ) -> None:
        self.generation_id = generation_id
        self.turn = turn  # the first turn, when the claim took it already
        self.channel = channel
        self.lost = ""  # why the claim was lost, if it was
        self.status_ahead: StatusShown | None = None  # the next prompt's status line, read
        self.notice_ahead: Notice | None = None  # the notice that goes with it
        self.closing_status: StatusShown | None = None  # the status after a turn released
        self.reply_part: Entry | None = None  # the reply's latest round shown, while it goes on
        self.relay = Relay(generation_id, lambda: self.session_id, render, lambda: len(RUNNING))
        self.agent = AgentSession(
            session,
            listener=self.on_event,
            generation_id=generation_id,
            on_delta=self.relay.on_delta,
            on_stream_end=self.relay.flush,
            on_thinking=self.relay.on_thinking,
        )

    @property
    def session_id(self) -> int:
        return self.agent.session_id

    async def run(
        self, handoff_focus: str | None = None, handoff_model: str = "", in_place: bool = False
    ) -> None:
        listener = asyncio.create_task(self.listen())
        heartbeat = asyncio.create_task(self.heartbeat())
        try:
            # A turn taken with the claim stored its prompt already: the context is as before it.
            await self.agent.load(before=self.turn.user if self.turn else None)
            if handoff_focus is not None:
                await self.relay.notify(ENDED)
                outcome = await self.run_handoff(handoff_focus, handoff_model, in_place=in_place)
                if outcome == "review":  # prompts queued meanwhile wait for the reviewed switch
                    return  # (or its discard)
            await self.take_turns()
        except ChatSession.DoesNotExist:  # deleted for good meanwhile: nothing more to write
            log.info("generation %s stops: its session is gone", self.generation_id)
        except Exception:
            log.exception("generation %s failed", self.generation_id)
            await self.relay.notify(Notice(FAILED, "error"))
        finally:
            listener.cancel()
            heartbeat.cancel()
            await asyncio.shield(self.finish())

    async def take_turns(self) -> None:
        """The queued prompts, one turn each, until none is left (or the claim is lost)."""
        declined = False  # an automatic handoff was cancelled or failed: send the prompt here
        while not self.lost:
            turn, self.turn = self.turn, None
            if turn is None:
                turn = await until_it_answers(  # what comes next is never left undecided
                    functools.partial(self.next_turn, auto_handoff=not declined)
                )
            if turn.handoff:
                outcome = await self.run_auto_handoff()
                if outcome == "review":  # the prompt waits for the reviewed switch
                    return
                declined = outcome != "switched"
                continue
            if turn.user is None and not turn.regenerate and not turn.go_on:
                self.closing_status = turn.status
                return
            declined = False
            # What a notice announced ("Queued", "Handoff cancelled") is over: said with the
            # turn's status line, in one message.
            self.status_ahead, self.notice_ahead = turn.status, ENDED
            if turn.regenerate or turn.go_on:
                await (self.agent.go_on() if turn.go_on else self.agent.regenerate())
                continue
            first = not self.agent.messages  # the session's first prompt
            await self.agent.prompt(
                turn.text, expand_prompt_templates=False, user=turn.user, ready=turn.ready
            )
            if first:
                titles.write_soon(self.session_id, self.show_title)
            focus, self.agent.proposed_handoff = self.agent.proposed_handoff, None
            if focus is not None and not self.lost and await self.run_proposed(focus) == "review":
                return  # the queued prompts wait for the reviewed switch

    async def next_turn(self, *, auto_handoff: bool) -> Turn:
        decide = short(next_turn)
        return await decide(self.agent.session, self.generation_id, auto_handoff=auto_handoff)

    async def finish(self) -> None:
        if not self.lost:
            self.agent.keep_context()
        closing = self.closing_status  # released by the last turn
        if closing is None:  # released in every outcome, once the database answers
            release = short(release_and_status)
            try:
                closing = await until_it_answers(
                    lambda: release(self.session_id, self.generation_id)
                )
            except ChatSession.DoesNotExist:
                return  # gone, and its claim with it
        await self.relay.show_status(closing, last=True)

    async def run_handoff(
        self, focus: str, model: str = "", *, automatic: bool = False, in_place: bool = False
    ) -> str:
        """Run /handoff (/compact: `in_place`) and tell the tabs; returns switched, compacted,
        review, cancelled or failed."""
        old_id = self.session_id
        try:
            result = await self.agent.handoff(
                focus, model=model, automatic=automatic, in_place=in_place
            )
        except NothingToHandOff as error:
            await self.relay.notify(Notice(str(error), "warning"))
        except HandoffCancelled:
            await self.relay.notify(Notice(handoff.CANCELLED, "warning"))
            return "cancelled"
        except HandoffFailed as error:
            await self.relay.notify(Notice(str(error), "error"))
        else:
            if result.compaction is not None:
                await self.relay.notify(Notice(COMPACTED, "success"))
                return "compacted"
            await self.handoff_succeeded(old_id, result)
            return "review" if result.new_session is None else "switched"
        return "failed"

    async def run_auto_handoff(self) -> str:
        """The preference's handoff, before a prompt that would fill the window. The prompt stays
        queued, so it moves to the new session with the switch (or waits for a review)."""
        await database_sync_to_async(set_kind)(self.session_id, self.generation_id, "handoff")
        await self.relay.show_status()
        in_place = await database_sync_to_async(Preferences.of_owner)(
            self.agent.session, "auto_compacts", "owner_auto_compacts"
        )
        await self.relay.notify(Notice(AUTO_COMPACT if in_place else AUTO_HANDOFF, "info"))
        return await self.run_handoff("", automatic=True, in_place=bool(in_place))

    async def run_proposed(self, focus: str) -> str:
        """The handoff the model proposed and the user allowed, once its reply ended."""
        await database_sync_to_async(set_kind)(self.session_id, self.generation_id, "handoff")
        await self.relay.show_status()
        return await self.run_handoff(focus)

    async def handoff_succeeded(self, old_id: int, result: HandoffResult) -> None:
        if result.new_session is None:  # B14: the user reviews the document first
            await database_sync_to_async(handoff_review.offer)(result.reply, result.written)
            model = result.reply.data["handoff"].get("model") or self.agent.session.model
            await self.relay.notify(ReviewOffered(result.reply, result.written, model))
            return
        self.relay.appended.clear()
        await self.relay.notify(Switched(result.new_session), to_session=old_id)
        await self.show_sidebar(result.new_session.owner_id)
        self.relay.notice = ""  # the redirect belongs to the old session's tabs only

    async def show_title(self, session: ChatSession) -> None:
        """A title written beside the chat: outside the numbered events (it may come after the
        job ended)."""
        await tabs.show(session.pk, self.relay.render(TitleChanged(session)))
        await self.show_sidebar(session.owner_id)

    async def show_sidebar(self, owner_id: int) -> None:
        """The owner's sidebar as it is now, in every tab of theirs (a title, a new session)."""
        html = await database_sync_to_async(self.relay.render)(SidebarChanged(owner_id))
        await tabs.show_to_owner(owner_id, html)

    async def listen(self) -> None:
        """Cancels and snapshot requests, from any tab of any process."""
        while True:
            message = await self.relay.layer.receive(self.channel)
            kind = message.get("type")
            if kind == "generation.cancel":
                self.agent.cancel()
            elif kind == "generation.answer":  # a tab answered a tool call's question
                self.agent.approvals.answered(int(message["question"]), str(message["answer"]))
            elif kind == "generation.snapshot_request":
                async with self.relay.holding():  # no event can slip between snapshot and seq
                    streamer = self.agent.streamer
                    snapshot = self.relay.snapshot(
                        replying=streamer.is_replying,
                        purpose=streamer.purpose,
                        stage=streamer.stage,
                    )
                    await self.relay.layer.send(message["reply_to"], snapshot)

    async def heartbeat(self) -> None:
        """Keep the claim; when it is lost, stop: two generations must never share a session."""
        keeper = leases()
        try:
            self.lost = await asyncio.shield(keeper.hold(self.generation_id))
        finally:
            keeper.drop(self.generation_id)
        log.warning("generation %s stops: %s", self.generation_id, self.lost)
        self.agent.abort(self.lost, keep=False)
        await self.relay.notify(Notice(f"This generation stopped: {self.lost}.", "error"))

    async def on_event(self, event: AgentEvent) -> None:
        """The agent's events, as the page's."""
        relay = self.relay
        if event.type == "agent_start":
            shown, self.status_ahead = self.status_ahead, None
            notice, self.notice_ahead = self.notice_ahead, None
            # The turn's opening (the status, the prompt's entry) goes with the reply's card.
            await relay.show_status(shown, notice=notice, ahead=True)
        elif event.type == "message_start" and event.role == Entry.Role.ASSISTANT:
            await relay.start_reply(Live("", event.purpose, event.stage))
        elif event.type == "message_end" and event.entry is None:  # a call that left nothing
            await relay.end_reply()
        elif event.type == "saving":  # the database does not answer: the reply waits for it
            await relay.notify(Notice(SAVING, "warning"))
        elif event.type == "saved":
            await relay.notify(ENDED)
        elif event.type == "tool_progress" and event.caller is not None:
            await relay.publish(ToolProgress(event.caller.pk, event.index, event.delta))
        elif event.type in ("tool_question", "tool_answered") and event.question is not None:
            await relay.publish(QuestionShown(event.question))
        elif event.type == "tool_end" and event.entry is not None and event.caller is not None:
            answered = ToolAnswered(self.agent.session, event.caller, event.entry)
            await relay.publish(answered, entry_id=event.entry.pk)
        elif event.type == "message_end" and event.entry is not None:
            await relay.flush()
            streamed = event.role == Entry.Role.ASSISTANT
            if streamed:  # a later tool round shows in the card its reply's first round opened
                self.reply_part = transcript.join(self.reply_part, event.entry)
            elif event.role == Entry.Role.USER:
                self.reply_part = None
            added = EntryAdded(self.agent.session, event.entry, streamed)
            if relay.ahead and not streamed:  # the prompt (or a note before the turn)
                relay.publish_ahead(added, entry_id=event.entry.pk)
            else:  # the status follows with the next turn or the job's end, a moment later
                await relay.publish(added, entry_id=event.entry.pk)
