"""One `/handoff` run (SPEC §2): the request, fitted to the model's window (with notes when the
session is too long), the document (H6), one round to finish a document that stopped at the
model's output limit, the coverage guard and its amendment round, and the switch to the new
session (H8–H10, B6).

A run is an object with explicit state: `stage` says which step it is at, and `cancelled`
that the user asked it to stop. A cancel aborts whatever streams now, and no later step runs:
a cancelled handoff's partial document never reaches a new session (B11).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from channels.db import database_sync_to_async

from .. import (
    compaction,
    context,
    coverage,
    drafts,
    handoff,
    ledger,
    status,
    store,
    todos,
    usage,
    window,
)
from ..context import ASSISTANT, USER
from ..handoff import StructureReport
from ..models import ChatSession, Entry, HandoffDraft, Preferences
from ..providers import Provider, ProviderError
from ..salience import Item
from ..tokens import Usage
from .handoff_notes import Notes
from .handoff_switch import cost_of, record_on, switch
from .provider import writer_of
from .streamer import Prepared, Streamer

log = logging.getLogger(__name__)


class HandoffCancelled(Exception):
    def __init__(self) -> None:
        super().__init__(handoff.CANCELLED)


class HandoffFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Handoff failed: {reason}")
        self.reason = reason


@dataclass
class HandoffResult:
    document: str  # what the new session starts with (agentweb's addendum included)
    report: StructureReport
    reply: Entry
    new_session: ChatSession | None = None  # None while the user reviews the document (B14)
    written: str = ""  # the document as the model wrote it, before agentweb's addendum
    compaction: Entry | None = None  # /compact: the entry the session now goes on from


class Agent(Protocol):
    """What a run needs of its agent: the normal prompt path (H5) and its streamer."""

    session: ChatSession
    provider: Provider
    generation_id: str
    streamer: Streamer

    async def emit(self, type_: str, **fields: Any) -> None: ...

    async def load(self, *, before: Entry | None = None) -> None: ...

    async def prompt(
        self,
        text: str,
        expand_prompt_templates: bool = True,
        *,
        purpose: str = "",
        prepare: Callable[[], Awaitable[Prepared]] | None = None,
        user: Entry | None = None,
    ) -> Entry | None: ...


class HandoffRun:
    def __init__(
        self,
        agent: Agent,
        focus: str = "",
        model: str = "",
        *,
        automatic: bool = False,
        in_place: bool = False,
    ) -> None:
        self.agent = agent
        self.focus = focus
        self.model = model  # the new session's ("": the session's own)
        self.automatic = automatic  # the threshold's handoff, not one the user asked for
        self.in_place = in_place  # /compact: the session goes on from the document itself
        self.stage = "starting"  # then request, notes, document, continuation, guard, amendment,
        # switch
        self.cancelled = False
        self.sent: list[dict[str, Any]] = []  # the request the document answers
        self.draft: HandoffDraft | None = None  # written ahead, at this leaf, for this focus
        self.behind: list[dict[str, Any]] | None = None  # the request updating an older draft
        self.writer: Provider = agent.provider  # what writes the document
        self.after = 0  # the session's latest entry before the run: its rounds come after it

    def cancel(self) -> None:
        """Stop the run: what streams now is aborted, and no later step runs."""
        self.cancelled = True
        self.agent.streamer.abort()

    async def run(self) -> HandoffResult:
        """Generate the document and switch to a new session seeded with it only (unless the
        user reviews it first, B14). Raises NothingToHandOff (H3: the guard, kept here
        only), HandoffCancelled or HandoffFailed. The document is written by the owner's
        preferred writer (Preferences → handoff_writer) where this server offers it."""
        streamer = self.agent.streamer
        own = streamer.provider
        self.writer = streamer.provider = await writer_of(self.agent.session, own)
        try:
            return await self._run()
        finally:
            streamer.provider = own

    async def _run(self) -> HandoffResult:
        session = self.agent.session
        branch = await database_sync_to_async(store.get_branch)(session)
        handoff.check_guard(store.count_messages(branch))
        self.after = await database_sync_to_async(usage.last_entry_id)(session.pk)
        prompt_text, work = await request_of(session, branch, self.focus)
        await self._look_for_a_draft(branch)
        context_before = session.context_tokens
        self.stage = "request"
        reply = await self.agent.prompt(
            prompt_text,
            expand_prompt_templates=False,
            purpose="handoff",
            prepare=lambda: self._request(branch, prompt_text, context_before),
        )
        reply, written = self._document_of(reply)
        if _stopped_at_the_limit(reply):
            reply, written = await self._finish(written)
        reply, document = await self._guard(branch, reply, written)
        document = handoff.with_ledger(document, work)
        result = HandoffResult(document, handoff.check_structure(document), reply, written=written)
        if self.in_place:
            result.compaction = await self._compact(reply, document, context_before)
            return result
        if await database_sync_to_async(_preference)(session, "review_handoff"):
            return result
        self._go_on("switch")
        try:
            result.new_session = await switch(session, reply, document, self.agent.generation_id)
        except Exception as exc:
            log.exception("handoff switch failed in session %s", session.pk)
            raise await switch_failed(session, exc) from exc
        return result

    async def _compact(self, reply: Entry, document: str, before: int) -> Entry:
        """/compact: the document becomes the session's compaction, shown where it stands, and
        the agent's context starts again from it."""
        self._go_on("switch")
        session = self.agent.session
        in_a_row = (await database_sync_to_async(status.restart)(session)).automatic_in_a_row
        entry = await database_sync_to_async(compaction.compact)(
            session,
            document,
            before,
            cost_of(reply),
            automatic_in_a_row=in_a_row + 1 if self.automatic else 0,
        )
        await self.agent.emit("message_end", role="", entry=entry)
        await self.agent.load()
        return entry

    async def _look_for_a_draft(self, branch: list[Entry]) -> None:
        """A draft written at this leaf for this focus; else, with no focus and Claude, the
        short request that brings a draft a few turns old up to date."""
        session, spec = self.agent.session, self.writer.spec
        self.draft = await database_sync_to_async(drafts.ready)(session, self.focus)
        if self.draft is None and not self.focus and not spec.is_local:
            behind = await database_sync_to_async(drafts.behind)(session.pk, branch, spec.budget)
            self.behind = None if behind is None else behind[1]

    def _go_on(self, stage: str) -> None:
        if self.cancelled:
            raise HandoffCancelled
        self.stage = stage

    async def _request(
        self, branch: list[Entry], prompt_text: str, context_before: int
    ) -> Prepared:
        """The handoff's request, made to fit the model's window (see window.py)."""
        provider = self.writer
        record: dict[str, Any] = {"context_before": context_before}
        if self.automatic:
            record["automatic"] = True
        if self.model:  # kept with the document: a reviewed switch goes to it too
            record["model"] = self.model
        if self.in_place:  # a compaction's: no session is ever started from it
            record["compact"] = True
        if self.draft is not None:  # written while the session was idle: no model call now
            self.stage = "document"
            draft = self.draft  # its tokens are the reply's: the session's usage counts them
            await database_sync_to_async(drafts.taken)(self.agent.session.pk, used=True)
            return Prepared(
                data={"handoff": {**record, "draft": True}},
                replay=draft.document,
                usage=Usage(
                    input=draft.input_tokens,
                    output=draft.output_tokens,
                    cache_read=draft.cache_read_tokens,
                    cache_write=draft.cache_write_tokens,
                ),
            )
        if self.behind is not None:  # only the turns after the draft, and the draft: short
            await database_sync_to_async(drafts.taken)(self.agent.session.pk, used=False)
            self.stage, self.sent = "document", self.behind
            data = {"handoff": {**record, "updated_draft": True}, "fitted": True}
            return Prepared(messages=self.sent, data=data)
        try:
            plan = await window.fit(context.context_parts(branch), prompt_text, provider)
            notes = ""
            if plan.chunks:
                self.stage = "notes"
                notes = await Notes(self.agent.session, self.agent.streamer, self.agent.emit).take(
                    plan, prompt_text
                )
        except ProviderError as error:
            return Prepared(data={"handoff": record}, failure=error.reason)
        self.stage = "document"
        record.update(fitted=plan.report(), budget=provider.spec.budget)
        if plan.report():
            record["sent_tokens"] = plan.size(prompt_text, notes)
        intro = handoff.notes_intro(notes, len(plan.chunks), provider.spec.label)
        self.sent = plan.messages(prompt_text, intro if notes else "")
        return Prepared(
            messages=self.sent,
            data={"handoff": record, **({"fitted": True} if plan.report() else {})},
        )

    def _document_of(self, reply: Entry | None) -> tuple[Entry, str]:
        """The document a handoff reply holds (H6), or why there is none.

        A cancel of the run, or an abort of the reply (a lost claim), means cancelled: an
        aborted reply's partial document never reaches a new session (B11).
        """
        if reply is None or self.cancelled or reply.status == Entry.Status.ABORTED:
            raise HandoffCancelled
        if reply.status == Entry.Status.FAILED:
            raise HandoffFailed(reply.error)
        document = handoff.extract_document([reply])
        if not document.strip():
            raise HandoffFailed(handoff.NO_TEXT)
        return reply, document

    async def _finish(self, document: str) -> tuple[Entry, str]:
        """The document stopped at the model's output limit: one more streamed, cancellable
        round, in which the model goes on with its own reply (the document so far ends the
        request, as the start of its turn). A document that stops there again fails, naming
        the limit: a cut-off document is never switched as if it were whole."""
        self._go_on("continuation")
        start = document.rstrip()  # the API refuses a turn's start that ends in white space
        messages = [*self.sent, {"role": ASSISTANT, "content": [{"type": "text", "text": start}]}]
        streamer = self.agent.streamer
        streamer.begin()
        try:
            data = {"continuation": True, "fitted": True}
            _, reply = await streamer.reply(
                self.agent.session, "handoff", messages, Prepared(data=data)
            )
        finally:
            streamer.end()
        if reply.status == Entry.Status.COMPLETE and not _stopped_at_the_limit(reply):
            return reply, start + handoff.extract_document([reply])
        if reply.status == Entry.Status.FAILED and reply.error != handoff.NO_TEXT:
            self._document_of(reply)  # a real failure, named as it is
        if reply.status == Entry.Status.ABORTED or self.cancelled:
            raise HandoffCancelled
        spec = self.writer.spec
        raise HandoffFailed(handoff.OUTPUT_LIMIT.format(label=spec.label, tokens=spec.max_output))

    async def _guard(self, branch: list[Entry], reply: Entry, document: str) -> tuple[Entry, str]:
        """Before the switch: the salient items the document dropped are carried over anyway.

        By default agentweb appends them in a section of its own. With the preference, and
        Claude, the model gets one more streamed round to work them in; whatever it still
        leaves out is appended. Returns the reply the document comes from, and the document.
        """
        self._go_on("guard")
        session = self.agent.session
        report = await asyncio.to_thread(coverage.coverage, branch, document, session.cwd)
        before, dropped, amended = report.summary(), report.salient_dropped, False
        amend = dropped and not self.writer.spec.is_local
        if amend and await database_sync_to_async(_preference)(session, "amend_handoff"):
            self._go_on("amendment")
            reply, document = await self._amend(document, dropped)
            report = await asyncio.to_thread(coverage.coverage, branch, document, session.cwd)
            dropped, amended = report.salient_dropped, True
        addendum = handoff.also_carried_over(dropped, report.total_entries)
        if addendum:  # judged again on the document as it goes: the figure the panel shows
            document = f"{document}\n\n{addendum}"
            report = await asyncio.to_thread(coverage.coverage, branch, document, session.cwd)
        record = {
            "before": before,
            "after": report.summary(),
            "added": min(len(dropped), handoff.MAX_CARRIED_OVER),
            "amended": amended,
        }
        spent = await database_sync_to_async(usage.after)(session.pk, self.after)
        await database_sync_to_async(record_on)(reply, record, spent.cost)
        return reply, document

    async def _amend(self, document: str, dropped: list[Item]) -> tuple[Entry, str]:
        """One streamed, cancellable round that asks the model to work dropped items in."""
        request = handoff.amend_request(document, dropped)
        only = [{"role": USER, "content": [{"type": "text", "text": request}]}]
        reply = await self.agent.prompt(
            request,
            expand_prompt_templates=False,
            purpose="handoff",
            prepare=lambda: _prepared(only, {"amendment": True, "fitted": True}),
        )
        return self._document_of(reply)


async def request_of(session: ChatSession, branch: list[Entry], focus: str) -> tuple[str, str]:
    """The handoff request for the session's branch, and the work ledger's section in it."""
    todo_list = (await database_sync_to_async(todos.state)(session)).todos
    own = await database_sync_to_async(_handoff_instructions)(session)
    work = ledger.section(await asyncio.to_thread(ledger.ledger_of, branch))
    return handoff.build_prompt(focus, todos.for_handoff(todo_list), own, work), work


async def switch_failed(session: ChatSession, exc: Exception) -> HandoffFailed:
    """A switch that raised created nothing (B6): say why, and keep a record of it (B13)."""
    failed = HandoffFailed(str(exc) or type(exc).__name__)
    await database_sync_to_async(session.append_custom)("handoff_failed", str(failed))
    return failed


def _stopped_at_the_limit(reply: Entry) -> bool:
    return bool(reply.data.get("message", {}).get("stopReason") == "length")


def _preference(session: ChatSession, name: str) -> bool:
    """The owner's yes/no preference ``name`` (off when they never saved any)."""
    prefs = Preferences.objects.filter(user_id=session.owner_id).first()
    return bool(prefs and getattr(prefs, name))


def _handoff_instructions(session: ChatSession) -> str:
    """The owner's standing instructions for handoff documents ("" when none)."""
    prefs = Preferences.objects.filter(user_id=session.owner_id).first()
    return prefs.handoff_instructions if prefs else ""


async def _prepared(messages: list[dict[str, Any]], data: dict[str, Any]) -> Prepared:
    return Prepared(messages=messages, data=data)
