"""Which process runs which generation: the claim, the job, and its channel-layer wiring.

A generation is a server-side job (an asyncio task of the process that
claimed the session), not part of a WebSocket: closing a tab does not stop it.
Events go to the group `session.<id>`; every tab's consumer forwards them.
The job listens on a channel of its own for cancel and snapshot requests, so
any tab of any process reaches it (SPEC B7, B8; DESIGN.md "How a generation flows").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from . import commands, handoff, partials, store, thinking, titles, todos, usage
from .agent import (
    NOTES,
    AgentEvent,
    AgentSession,
    HandoffCancelled,
    HandoffFailed,
    HandoffResult,
    switch_failed,
)
from .context import estimate_tokens
from .handoff import NothingToHandOff
from .models import ChatSession, Entry, PendingPrompt
from .providers import ProviderError, catalog
from .rendering import Blocks

log = logging.getLogger(__name__)

_jobs: dict[str, asyncio.Task[None]] = {}  # strong references: running jobs of this process
_titles: dict[int, asyncio.Task[None]] = {}  # titles being written, by session

BUSY = "A reply is being generated in this session: wait for it or cancel it first."


def group_name(session_id: int) -> str:
    return f"session.{session_id}"


def user_group(user_id: int) -> str:
    """Every socket of one user, so signing out can close those of that sign-in."""
    return f"user.{user_id}"


def close_sockets_of(user_id: int, login: str) -> None:
    """Close the sockets opened with sign-in `login` (every socket of the user when empty)."""
    async_to_sync(get_channel_layer().group_send)(
        user_group(user_id), {"type": "user.logout", "login": login}
    )


# --- the claim (sync, database) ----------------------------------------------
INTERRUPTED = "A reply was interrupted: the server stopped while it was being generated."


def claim(session_id: int, generation_id: str, kind: str, channel: str) -> bool:
    """Take the session's one generation slot with a conditional UPDATE (B8).

    Taking over a claim whose lease ran out (its process died) records the
    interruption in the session's history (B12).
    """
    with transaction.atomic():
        previous = ChatSession.objects.filter(pk=session_id).values_list("generation_id", flat=True)
        was_held = bool(previous.first())
        updated = ChatSession.objects.filter(ChatSession.claimable(), pk=session_id).update(
            generation_id=generation_id,
            generation_kind=kind,
            generation_channel=channel,
            generation_started_at=timezone.now(),
            generation_lease_until=ChatSession.lease_until(),
        )
        if updated and was_held:
            keep_partial(session_id)
            store.append_custom(ChatSession(pk=session_id), "interrupted", INTERRUPTED)
    return updated == 1


def keep_partial(session_id: int) -> None:
    """The reply a dead process was streaming, as last saved: kept as an interrupted entry."""
    session = ChatSession.objects.get(pk=session_id)
    if not session.partial_text:
        return
    if session.partial_purpose == NOTES:
        store.append_custom(
            session, NOTES, session.partial_text, status=Entry.Status.ABORTED, error="interrupted"
        )
    else:
        purpose = {"purpose": session.partial_purpose} if session.partial_purpose else None
        store.append_message(
            session,
            Entry.Role.ASSISTANT,
            [{"type": "text", "text": session.partial_text}],
            status=Entry.Status.ABORTED,
            error="interrupted",
            model=session.partial_model,
            data=purpose,
        )


def recover_interrupted() -> int:
    """At start-up of a single-process server, no earlier claim can be alive: expire them all,
    keeping the replies they were streaming.

    With a shared channel layer (REDIS_URL) other processes may be generating,
    so their claims are left to expire by their leases.
    """
    if "InMemoryChannelLayer" not in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
        return 0
    with transaction.atomic():
        for session_id in ChatSession.objects.exclude(generation_id="").values_list(
            "pk", flat=True
        ):
            keep_partial(session_id)
        return ChatSession.objects.exclude(generation_id="").update(
            generation_lease_until=timezone.now(), generation_channel=""
        )


LOST = "another server process took the session over"
UNRENEWABLE = "its claim on the session could not be renewed"


class Leases:
    """Keeps the claims of this process's generations alive, all of them in one UPDATE a few
    times per lease (one per generation cost most of the database thread under load).

    A failed renewal is logged and retried sooner; a claim another process has taken, or one
    that cannot be renewed before it would run out, ends with its reason.
    """

    def __init__(
        self, renew: Callable[[list[str]], Awaitable[set[str]]], seconds: Callable[[], float]
    ) -> None:
        self.renew = renew
        self.seconds = seconds
        self.held: dict[str, asyncio.Future[str]] = {}
        self.task: asyncio.Task[None] | None = None

    def hold(self, generation_id: str) -> asyncio.Future[str]:
        """A future that resolves with the reason, when this generation's claim is lost."""
        lost = self.held[generation_id] = asyncio.get_running_loop().create_future()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.keep())
        return lost

    def drop(self, generation_id: str) -> None:
        self.held.pop(generation_id, None)

    async def keep(self) -> None:
        renewed_at = time.monotonic()
        delay = self.seconds() / 3
        while self.held:
            await asyncio.sleep(delay)
            held = [gid for gid, lost in self.held.items() if not lost.done()]
            if not held:
                continue
            try:
                kept = await self.renew(held)
            except Exception:
                log.warning("renewing the claims of generations failed; retrying", exc_info=True)
                if time.monotonic() - renewed_at > self.seconds() * 0.8:
                    self._lose(held, UNRENEWABLE)  # they may run out before the next try
                delay = min(1.0, self.seconds() / 10)
                continue
            self._lose([gid for gid in held if gid not in kept], LOST)
            renewed_at, delay = time.monotonic(), self.seconds() / 3

    def _lose(self, generation_ids: list[str], reason: str) -> None:
        for generation_id in generation_ids:
            lost = self.held.pop(generation_id, None)
            if lost is not None and not lost.done():
                lost.set_result(reason)


def renew_all(generation_ids: list[str]) -> set[str]:
    """Renew these claims in one UPDATE; the ids still held (a claim moves with a handoff)."""
    ChatSession.objects.filter(generation_id__in=generation_ids).update(
        generation_lease_until=ChatSession.lease_until()
    )
    return set(
        ChatSession.objects.filter(generation_id__in=generation_ids).values_list(
            "generation_id", flat=True
        )
    )


_leases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Leases] = weakref.WeakKeyDictionary()


def leases() -> Leases:
    """This process's (this event loop's) keeper of claims."""
    loop = asyncio.get_running_loop()
    if loop not in _leases:
        _leases[loop] = Leases(
            database_sync_to_async(renew_all), lambda: settings.AGENTWEB_GENERATION_LEASE
        )
    return _leases[loop]


def release(session_id: int, generation_id: str) -> None:
    ChatSession.objects.filter(pk=session_id, generation_id=generation_id).update(
        generation_id="", generation_kind="", generation_channel="", generation_lease_until=None
    )


def release_and_status(session_id: int, generation_id: str) -> str:
    """Release the claim (if the job still holds it), and the status line after."""
    release(session_id, generation_id)
    return status_html(session_id)


def next_prompt_or_release(session_id: int, generation_id: str) -> str | None:
    """Pop the oldest queued prompt, or release the claim when none is left, atomically.

    A prompt queued by another tab either is seen here or finds the claim
    released and starts its own generation: it can never be stranded.
    """
    with transaction.atomic():
        held = (
            ChatSession.objects.select_for_update()
            .filter(pk=session_id, generation_id=generation_id)
            .exists()
        )
        if not held:
            return None
        pending = PendingPrompt.objects.filter(session_id=session_id).order_by("id").first()
        if pending is None:
            release(session_id, generation_id)
            return None
        pending.delete()
        ChatSession.objects.filter(pk=session_id).update(
            generation_kind="prompt", generation_started_at=timezone.now()
        )
        return pending.text


AUTO_HANDOFF = (
    "The next message would fill the context window past your automatic handoff setting: "
    "handing off first (Cancel sends it in this session instead)."
)


def auto_handoff_due(session_id: int, text: str | None = None) -> bool:
    """Whether the oldest queued prompt (or `text`) would take the context past the owner's
    threshold."""
    threshold_percent, model, tokens = ChatSession.objects.values_list(
        "owner__agentweb_preferences__auto_handoff_at", "model", "context_tokens"
    ).get(pk=session_id)
    if not threshold_percent:
        return False
    if text is None:
        pending = PendingPrompt.objects.filter(session_id=session_id).order_by("id").first()
        if pending is None:
            return False
        text = pending.text
    projected = tokens + estimate_tokens(text)
    threshold = catalog.spec(model).window * threshold_percent / 100
    if projected < threshold:
        return False
    return Entry.objects.filter(session_id=session_id, kind=Entry.Kind.MESSAGE).count() >= 2


@dataclass(frozen=True)
class Turn:
    """What a job does next, as one database call decided it."""

    text: str = ""  # the prompt to send, its template expanded; empty: nothing is left
    user: Entry | None = None  # the prompt, already stored as the session's user message
    handoff: bool = False  # the automatic handoff comes first
    status: str = ""  # the status line as the prompt begins
    regenerate: bool = False  # another reply to the message the session's leaf is at


def next_turn(session: ChatSession, generation_id: str, *, auto_handoff: bool) -> Turn:
    """The automatic handoff when it is due; else the oldest queued prompt, stored as the
    session's next user message (or the claim released when none is left).

    One call, so that under load a prompt waits behind as few others as possible on the one
    database thread before its request goes out.
    """
    if auto_handoff and auto_handoff_due(session.pk):
        return Turn(handoff=True)
    text = next_prompt_or_release(session.pk, generation_id)
    if not text:
        return Turn(status=status_html(session.pk))  # released: the status as the job ends
    return _begin(session, text, reread=True)


def first_turn(session: ChatSession, text: str, generation_id: str) -> Turn:
    """The turn of a prompt that found its session idle and claimed it (`session` as read after
    the claim): sent at once, without passing through the queue, unless prompts queued before
    it go first or the automatic handoff is due (the prompt then waits in the queue)."""
    if PendingPrompt.objects.filter(session_id=session.pk).exists() or auto_handoff_due(
        session.pk, text
    ):
        PendingPrompt.objects.create(session_id=session.pk, text=text)
        return next_turn(session, generation_id, auto_handoff=True)
    return _begin(session, text, reread=False)


def _begin(session: ChatSession, text: str, *, reread: bool) -> Turn:
    """The prompt stored as the session's next user message; the status line as it starts.
    `session` was read as its claim was taken; a later turn's rereads it (the claim's lease and
    kind have moved since)."""
    text = store.expand_prompt_template(session, text)
    user = store.append_message(session, Entry.Role.USER, [{"type": "text", "text": text}])
    shown = ChatSession.objects.get(pk=session.pk) if reread else session
    return Turn(text, user, status=partials.status(shown, **status_state(shown)))


NOT_EDITABLE = "Only a message you wrote can be edited."
NOT_REGENERABLE = "Only a reply to a message can be regenerated."


def begin_branch(
    session: ChatSession, entry_id: int, text: str | None, generation_id: str, channel: str
) -> str | tuple[ChatSession, Turn, str]:
    """An edit (`text`: the message's new wording) or a regeneration (`text` None) of entry
    `entry_id`, in one database call: the session claimed, its leaf moved to the entry's
    parent (the new message or reply goes beside the old one), and the job's first turn.

    Returns a refusal, or the session as claimed, the turn, and the transcript as it is
    now (before the new message), for every tab.
    """
    refusal = over_a_cap(session, commands.Prompt(text or ""))
    if refusal:
        return refusal
    target = Entry.objects.filter(pk=entry_id, session_id=session.pk).first()
    problem = _not_branchable(target, editing=text is not None)
    if problem:
        return problem
    assert target is not None
    with transaction.atomic():  # claimed and moved, or neither
        if not claim(session.pk, generation_id, "prompt", channel):
            return store.BUSY_BRANCHING
        claimed = ChatSession.objects.get(pk=session.pk)
        store.move_leaf(claimed, target.parent_id, generation_id=generation_id)
        if text is None:
            status = partials.status(claimed, **status_state(claimed))
            return claimed, Turn(regenerate=True, status=status), partials.transcript(claimed)
        turn = _begin(claimed, text, reread=False)
    assert turn.user is not None
    turn.user.siblings = store.siblings(turn.user)
    return claimed, turn, partials.transcript(claimed, before=turn.user.pk)


def _not_branchable(entry: Entry | None, *, editing: bool) -> str:
    """Why this entry cannot be edited (or regenerated): empty when it can."""
    if editing:
        mine = entry is not None and entry.kind == Entry.Kind.MESSAGE and entry.role == "user"
        return "" if mine and entry and not entry.data.get("purpose") else NOT_EDITABLE
    reply = entry is not None and entry.kind == Entry.Kind.MESSAGE and entry.role == "assistant"
    if not reply or not entry or entry.data.get("purpose") or entry.parent_id is None:
        return NOT_REGENERABLE
    asked = Entry.objects.filter(pk=entry.parent_id, kind=Entry.Kind.MESSAGE).values_list(
        "role", flat=True
    )
    return "" if asked.first() in (Entry.Role.USER, Entry.Role.TOOL_RESULT) else NOT_REGENERABLE


def set_kind(session_id: int, generation_id: str, kind: str) -> None:
    ChatSession.objects.filter(pk=session_id, generation_id=generation_id).update(
        generation_kind=kind, generation_started_at=timezone.now()
    )


def status_html(session_id: int) -> str:
    session = ChatSession.objects.get(pk=session_id)
    return partials.status(session, **status_state(session))


def status_state(session: ChatSession) -> dict[str, Any]:
    """Everything the status line shows, read from the database (true in every process)."""
    context_before = None
    if session.parent_session_id:
        seed = Entry.objects.filter(session=session, parent__isnull=True).only("data").first()
        context_before = seed.data.get("context_tokens_before") if seed else None
    return {
        "generating": session.is_generating,
        "generation_kind": session.generation_kind,
        "generation_started_at": session.generation_started_at,
        "queued": PendingPrompt.objects.filter(session=session).count(),
        "interrupted": session.was_interrupted,
        "context_before": context_before,
        "session_usage": usage.of_sessions([session.pk])[session.pk],
    }


@dataclass(frozen=True)
class CommandResult:
    """What a session command did: refused (the typed text comes back), or html for the tab
    that typed it (a notice, or a redirect); changes every tab sees are announced."""

    refusal: str = ""
    html: str = ""


def session_command(session_id: int, name: str, args: str) -> CommandResult:
    """/thinking, /model, /rename, /new, /export and /tree: what their buttons do."""
    session = ChatSession.objects.select_related("owner").get(pk=session_id)
    if name == "thinking":
        if not args:
            level = session.thinking_level
            notice = f"Thinking level: {level}. Set it with /thinking off, low, medium or high."
            return CommandResult(html=partials.notice(notice))
        return CommandResult(refusal=set_thinking(session, args.lower()))
    if name == "model":
        return _model_command(session, args)
    if name == "rename":
        refusal = store.rename(session, args)
        if not refusal:
            announce(session_id, partials.title(session))
        return CommandResult(refusal=refusal)
    if name == "new":
        new = store.new_session(session.owner, model=catalog.default_model())
        return CommandResult(html=partials.redirect(new.get_absolute_url()))
    if name == "export":
        fmt = (args or "md").lower().removeprefix(".")
        if fmt not in ("md", "jsonl"):
            return CommandResult(refusal=f"Export as md or jsonl, not “{args}”.")
        url = reverse(f"chat:export_{fmt}", args=[session_id])
        return CommandResult(html=partials.redirect(url))
    if name == "tree":
        return CommandResult(html=partials.redirect(reverse("chat:tree", args=[session_id])))
    raise ValueError(f"not a session command: /{name}")


MODEL_BUSY = "Wait for the reply to end (or cancel it) to change the model."


def _model_command(session: ChatSession, wanted: str) -> CommandResult:
    offered = catalog.offered()
    names = ", ".join(model.id for model in offered)
    if not wanted:
        current = next((m.label for m in offered if m.id == session.model), session.model)
        notice = f"Model: {current}. Change it with /model and one of: {names}."
        return CommandResult(html=partials.notice(notice))
    chosen = next((m.id for m in offered if wanted.lower() in (m.id.lower(), m.label.lower())), "")
    if not chosen:
        return CommandResult(refusal=f"Unknown model “{wanted}”: choose one of {names}.")
    if session.is_generating:
        return CommandResult(refusal=MODEL_BUSY)
    if chosen != session.model:
        announce_entry(session.pk, store.change_model(session, chosen))
    return CommandResult()


def thinking_refusal(session: ChatSession, level: str) -> str:
    """Why the session's thinking level cannot become `level` now (empty: it can)."""
    if level not in thinking.LEVELS:
        return thinking.unknown(level)
    if session.is_generating:
        return "Wait for the reply to end (or cancel it) to change the thinking level."
    return ""


def set_thinking(session: ChatSession, level: str) -> str:
    """The level changed, shown in every tab; returns a refusal (empty: done)."""
    refusal = thinking_refusal(session, level)
    if refusal:
        return refusal
    if level != session.thinking_level:
        announce_entry(session.pk, store.change_thinking(session, level))
    return ""


async def show_in_tabs(session_id: int, html: str) -> None:
    """Show this in every tab of the session."""
    await get_channel_layer().group_send(
        group_name(session_id), {"type": "session.update", "html": html}
    )


def announce(session_id: int, html: str) -> None:
    """`show_in_tabs`, from synchronous code (a view, a database call)."""
    async_to_sync(show_in_tabs)(session_id, html)


def announce_branch(session_id: int) -> None:
    """Show the session's branch, just switched, in every tab of the session."""
    session = ChatSession.objects.get(pk=session_id)
    announce(
        session_id, partials.transcript(session) + partials.status(session, **status_state(session))
    )


def announce_entry(session_id: int, entry: Entry) -> None:
    """Show an entry added outside a generation (a model change) in every tab of the session."""
    html = partials.entry(entry) + status_html(session_id)
    async_to_sync(get_channel_layer().group_send)(
        group_name(session_id), {"type": "session.entry", "entry": entry.pk, "html": html}
    )


def over_a_cap(session: ChatSession, parsed: Any) -> str:
    """Why a prompt or /handoff may not be taken now (empty: it may): a session queues at most
    AGENTWEB_MAX_QUEUED_PROMPTS prompts, and a user runs at most
    AGENTWEB_MAX_GENERATIONS_PER_USER generations at once."""
    fresh = ChatSession.objects.get(pk=session.pk)
    if fresh.is_generating:
        queued = PendingPrompt.objects.filter(session_id=session.pk).count()
        limit = settings.AGENTWEB_MAX_QUEUED_PROMPTS
        if not isinstance(parsed, commands.CommandCall) and queued >= limit:
            return (
                f"{queued} messages are already waiting in this session (the limit is {limit}): "
                "send this one when they have gone."
            )
        return ""
    running = (
        ChatSession.objects.filter(
            owner_id=session.owner_id, generation_lease_until__gt=timezone.now()
        )
        .exclude(generation_id="")
        .count()
    )
    limit = settings.AGENTWEB_MAX_GENERATIONS_PER_USER
    if running >= limit:
        return (
            f"{running} replies are being generated in your other sessions (the limit is "
            f"{limit}): send this when one of them ends."
        )
    return ""


def message_count(session_id: int) -> int:
    return store.count_messages(store.get_branch(ChatSession(pk=session_id)))


# --- the job -----------------------------------------------------------------
class Job:
    """One generation run: a handoff and/or the queued prompts, in one process."""

    def __init__(
        self, session: ChatSession, generation_id: str, channel: str, *, turn: Turn | None = None
    ) -> None:
        self.generation_id = generation_id
        self.turn = turn  # the first turn, when the claim took it already
        self.channel = channel
        self.layer = get_channel_layer()
        self.seq = 0
        # (entry id, html) of this run's latest entries, for snapshots; older ones a resyncing
        # tab reads from the database.
        self.appended: deque[tuple[int, str]] = deque(maxlen=50)
        self.status = ""
        self.notice = ""  # the last notice, so a tab that resyncs still sees it
        self.pending_text = ""  # streamed text not yet sent: deltas go out in batches
        self.pending_thinking = ""  # streamed thinking not yet sent, batched the same way
        self.thinking_sent = ""  # the streaming reply's thinking as sent so far
        self.sent = Blocks()  # the streaming reply as sent so far (what snapshots show)
        self.flush_task: asyncio.Task[None] | None = None
        self.lost = ""  # why the claim was lost, if it was
        self.status_ahead = ""  # the status line for the next prompt's start, already rendered
        self.closing_status = ""  # the status line after the claim's release, when a turn did it
        # One message at a time, in sequence order, even when tasks publish concurrently.
        self.publishing = asyncio.Lock()
        self.agent = AgentSession(
            session,
            listener=self.on_event,
            generation_id=generation_id,
            on_delta=self.on_delta,
            on_stream_end=self.flush,
            on_thinking=self.on_thinking,
        )

    @property
    def session_id(self) -> int:
        return self.agent.session_id

    async def run(self, handoff_focus: str | None = None) -> None:
        listener = asyncio.create_task(self.listen())
        heartbeat = asyncio.create_task(self.heartbeat())
        try:
            # A turn taken with the claim stored its prompt already: the context is as before it.
            await self.agent.load(before=self.turn.user if self.turn else None)
            if handoff_focus is not None and await self.run_handoff(handoff_focus) == "review":
                return  # prompts queued meanwhile wait for the reviewed switch (or its discard)
            declined = False  # an automatic handoff was cancelled or failed: send the prompt here
            while not self.lost:
                turn, self.turn = self.turn, None
                if turn is None:
                    turn = await database_sync_to_async(next_turn)(
                        self.agent.session, self.generation_id, auto_handoff=not declined
                    )
                if turn.handoff:
                    outcome = await self.run_auto_handoff()
                    if outcome == "review":  # the prompt waits for the reviewed switch
                        break
                    declined = outcome != "switched"
                    continue
                if not turn.text and not turn.regenerate:
                    self.closing_status = turn.status
                    break
                declined = False
                self.status_ahead = turn.status
                if turn.regenerate:
                    await self.agent.regenerate()
                    continue
                first = not self.agent.messages  # the session's first prompt
                await self.agent.prompt(turn.text, expand_prompt_templates=False, user=turn.user)
                if first:
                    write_title_soon(self.session_id)
        except Exception:
            log.exception("generation %s failed", self.generation_id)
        finally:
            listener.cancel()
            heartbeat.cancel()
            await asyncio.shield(self.finish())

    async def finish(self) -> None:
        if not self.lost:
            self.agent.keep_context()
        closing = self.closing_status  # released by the last turn
        if not closing:
            closing = await database_sync_to_async(release_and_status)(
                self.session_id, self.generation_id
            )
        await self.publish_status(closing)

    async def run_handoff(self, focus: str) -> str:
        """Run /handoff and tell the tabs; returns switched, review, cancelled or failed."""
        old_id = self.session_id
        try:
            result = await self.agent.handoff(focus)
        except NothingToHandOff as error:
            await self.notify(partials.notice(str(error), "warning"))
        except HandoffCancelled:
            await self.notify(partials.notice(handoff.CANCELLED, "warning"))
            return "cancelled"
        except HandoffFailed as error:
            await self.notify(partials.notice(str(error), "error"))
        else:
            await self.handoff_succeeded(old_id, result)
            return "review" if result.new_session is None else "switched"
        return "failed"

    async def run_auto_handoff(self) -> str:
        """The preference's handoff, before a prompt that would fill the window. The prompt stays
        queued, so it moves to the new session with the switch (or waits for a review)."""
        await database_sync_to_async(set_kind)(self.session_id, self.generation_id, "handoff")
        await self.publish_status()
        await self.notify(partials.notice(AUTO_HANDOFF, "info"))
        return await self.run_handoff("")

    async def handoff_succeeded(self, old_id: int, result: HandoffResult) -> None:
        if result.new_session is None:  # B14: the user reviews the document first
            html = await database_sync_to_async(partials.review)(result.reply)
            await self.notify(html)
            return
        self.appended.clear()
        await self.notify(
            partials.notice(handoff.STARTED, "success")
            + partials.redirect(result.new_session.get_absolute_url()),
            group_of=old_id,
        )
        self.notice = ""  # the redirect belongs to the old session's tabs only

    async def listen(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            kind = message.get("type")
            if kind == "generation.cancel":
                if self.agent.is_generating_handoff:
                    self.agent.abort_handoff()
                else:
                    self.agent.abort()
            elif kind == "generation.snapshot_request":
                async with self.publishing:  # no event can slip between snapshot and seq
                    await self.layer.send(message["reply_to"], self.snapshot())

    async def heartbeat(self) -> None:
        """Keep the claim; when it is lost, stop: two generations must never share a session."""
        keeper = leases()
        try:
            self.lost = await asyncio.shield(keeper.hold(self.generation_id))
        finally:
            keeper.drop(self.generation_id)
        log.warning("generation %s stops: %s", self.generation_id, self.lost)
        self.agent.abort(self.lost, keep=False)
        await self.notify(partials.notice(f"This generation stopped: {self.lost}.", "error"))

    def snapshot(self) -> dict[str, Any]:
        """Everything a tab needs to catch up to event `seq`: the text sent so far, not the batch
        still pending (it follows as the next delta). Called holding `publishing`."""
        text = self.sent.text if self.agent.is_replying else None
        return {
            "type": "generation.snapshot",
            "gen": self.generation_id,
            "seq": self.seq,
            "session": self.session_id,
            "entries": list(self.appended),
            "html": partials.live(
                text, self.agent.partial_purpose, self.agent.partial_stage, self.thinking_sent
            )
            + self.status
            + self.notice,
        }

    async def on_event(self, event: AgentEvent) -> None:
        if event.type == "agent_start":
            html, self.status_ahead = self.status_ahead, ""
            await self.publish_status(html)
        elif event.type == "message_start" and event.role == Entry.Role.ASSISTANT:
            async with self.publishing:
                self.sent, self.thinking_sent = Blocks(), ""
                await self._send(partials.live("", event.purpose, event.stage))
        elif event.type == "message_end" and event.entry is None:  # a call that left nothing
            await self.flush()
            async with self.publishing:
                await self._send(partials.live(None))
        elif event.type == "tool_end" and event.entry is not None and event.caller is not None:
            # The call's line in the reply gets its result folded under it, and the todo list
            # the tool set goes to the panel.
            result, caller = event.entry, event.caller
            call_id = str(result.data.get("message", {}).get("toolCallId"))
            caller.folded_results = {**(caller.folded_results or {}), call_id: result}
            html = partials.entry_again(caller)
            details = result.data.get("message", {}).get("details", {})
            if "todos" in details:
                html += partials.todo_panel(self.agent.session, todos.from_dicts(details["todos"]))
            self.appended.append((result.pk, html))
            await self.publish(html, entry_id=result.pk)
        elif event.type == "message_end" and event.entry is not None:
            await self.flush()
            html = partials.entry(event.entry)
            self.appended.append((event.entry.pk, html))
            if event.role == Entry.Role.ASSISTANT:
                html = partials.live(None) + html
            else:
                html += partials.title(self.agent.session)
            await self.publish(html, entry_id=event.entry.pk)  # the status follows with the
            # next turn or the job's end, a moment later

    def on_delta(self, text: str) -> None:
        """Streamed text, gathered into one delta per batch interval; a reply's first delta
        goes at once (the time to the first token is what a person waits for)."""
        first = not self.sent.text and not self.pending_text
        self.pending_text += text
        if self.flush_task is None:
            self.flush_task = asyncio.create_task(self.flush_soon(wait=not first))

    def on_thinking(self, text: str) -> None:
        """Streamed thinking, batched as text is (its first delta goes at once too)."""
        first = not self.thinking_sent and not self.pending_thinking
        self.pending_thinking += text
        if self.flush_task is None:
            self.flush_task = asyncio.create_task(self.flush_soon(wait=not first))

    async def flush_soon(self, wait: bool = True) -> None:
        if wait:
            await asyncio.sleep(batch_seconds())
        self.flush_task = None
        await self.flush()

    async def flush(self) -> None:
        """Send the streamed text not sent yet, as one delta."""
        if self.flush_task is not None:
            self.flush_task.cancel()
            self.flush_task = None
        async with self.publishing:  # taken and sent as one step: a snapshot sees neither half
            if self.pending_thinking:
                thought, self.pending_thinking = self.pending_thinking, ""
                self.thinking_sent += thought
                await self._send(partials.thinking_delta(thought))
            if self.pending_text:
                text, self.pending_text = self.pending_text, ""
                finished = self.sent.add(text)  # markdown blocks this text ended
                if finished:
                    await self._send(partials.blocks_closed(finished, self.sent.tail))
                else:
                    await self._send(partials.delta(text))

    async def publish_status(self, html: str = "") -> None:
        """The status line, as given or as read now."""
        self.status = html or await database_sync_to_async(status_html)(self.session_id)
        await self.publish(self.status)

    async def notify(self, html: str, *, group_of: int | None = None) -> None:
        self.notice = html
        await self.publish(html, group_of=group_of)

    async def publish(self, html: str, *, entry_id: int = 0, group_of: int | None = None) -> None:
        async with self.publishing:
            await self._send(html, entry_id=entry_id, group_of=group_of)

    async def _send(self, html: str, *, entry_id: int = 0, group_of: int | None = None) -> None:
        """The next event in sequence; only ever called holding `publishing`."""
        self.seq += 1
        await self.layer.group_send(
            group_name(group_of or self.session_id),
            {
                "type": "agent.event",
                "gen": self.generation_id,
                "seq": self.seq,
                "entry": entry_id,
                "html": html,
            },
        )


def batch_seconds() -> float:
    """How long streamed text waits to go out with more: the batch interval, or longer when so
    many generations run in this process that their batches would pass the relay's rate."""
    sharing = len(_jobs) / settings.AGENTWEB_RELAY_MESSAGES_PER_SECOND
    return max(settings.AGENTWEB_DELTA_BATCH_SECONDS, sharing)


# --- entry points for consumers ----------------------------------------------
async def start(session: ChatSession, kind: str, handoff_focus: str | None = None) -> bool:
    """Claim the session and run a job in this process; False if one already runs."""
    generation_id, channel = await _new_generation()
    if not await database_sync_to_async(claim)(session.pk, generation_id, kind, channel):
        return False
    session = await database_sync_to_async(ChatSession.objects.get)(pk=session.pk)
    _launch(Job(session, generation_id, channel), handoff_focus)
    return True


async def _new_generation() -> tuple[str, str]:
    """A generation's id and the job's own channel. The channel has the layer's default
    prefix: channels-redis demultiplexes all of a process's channels from one list, and a
    channel of another prefix would starve the consumers."""
    return uuid.uuid4().hex, await get_channel_layer().new_channel()


def _launch(job: Job, handoff_focus: str | None = None) -> None:
    task = asyncio.create_task(job.run(handoff_focus))
    _jobs[job.generation_id] = task
    task.add_done_callback(lambda _: _jobs.pop(job.generation_id, None))


async def start_if_queued(session: ChatSession) -> None:
    """Send the prompts that waited (for a reviewed handoff), if any."""
    queued = await database_sync_to_async(PendingPrompt.objects.filter(session=session).exists)()
    if queued:
        await start(session, "prompt")


@dataclass(frozen=True)
class Submitted:
    """What became of a prompt: refused, sent, or queued behind the reply that is running."""

    refusal: str = ""  # why it was not taken (a cap)
    queued_status: str = ""  # the status line to show, when it waits behind a running reply


def queue_prompt(
    session: ChatSession, text: str, generation_id: str, channel: str
) -> tuple[Submitted, tuple[ChatSession, Turn] | None]:
    """A prompt in one database call: refused over a cap, else queued; and when no generation
    runs, the session claimed and the job's first turn taken, ready to send.

    Under load, every call on the one database thread waits behind the calls of every other
    prompt, so a prompt's request goes out after this one call.
    """
    refusal = over_a_cap(session, commands.Prompt(text))
    if refusal:
        return Submitted(refusal=refusal), None
    if claim(session.pk, generation_id, "prompt", channel):
        claimed = ChatSession.objects.get(pk=session.pk)
        return Submitted(), (claimed, first_turn(claimed, text, generation_id))
    PendingPrompt.objects.create(session_id=session.pk, text=text)
    # Queued before the running job's last look at the queue, or after its release: then the
    # claim is free now. Either way the prompt is sent (B10: never stranded).
    if claim(session.pk, generation_id, "prompt", channel):
        claimed = ChatSession.objects.get(pk=session.pk)
        return Submitted(), (claimed, next_turn(claimed, generation_id, auto_handoff=True))
    return Submitted(queued_status=status_html(session.pk)), None


async def submit_prompt(session: ChatSession, text: str) -> Submitted:
    """Queue the prompt, and start a generation unless one runs (the prompt then waits)."""
    generation_id, channel = await _new_generation()
    submitted, claimed = await database_sync_to_async(queue_prompt)(
        session, text, generation_id, channel
    )
    if claimed is not None:
        _launch(Job(claimed[0], generation_id, channel, turn=claimed[1]))
    return submitted


async def branch_and_reply(session: ChatSession, entry_id: int, text: str | None = None) -> str:
    """Edit a message you wrote (`text`: its new wording) or regenerate a reply (`text` None):
    the new message or reply goes on a branch beside the old one, which every tab now shows,
    and the model replies there. Returns a refusal, or an empty string."""
    generation_id, channel = await _new_generation()
    begun = await database_sync_to_async(begin_branch)(
        session, entry_id, text, generation_id, channel
    )
    if isinstance(begun, str):
        return begun
    claimed, turn, transcript = begun
    await show_in_tabs(session.pk, transcript)
    _launch(Job(claimed, generation_id, channel, turn=turn))
    return ""


async def start_handoff(session: ChatSession, focus: str) -> str | None:
    """The command layer's /handoff: the guard (H3), then a handoff job; returns a refusal."""
    if await database_sync_to_async(message_count)(session.pk) < 2:
        return handoff.NOTHING_TO_HAND_OFF
    if not await start(session, "handoff", handoff_focus=focus):
        return "A handoff or reply is already running in this session: wait for it or cancel it."
    return None


async def confirm_handoff(session: ChatSession, reply_id: int, document: str) -> ChatSession | str:
    """B14: switch with the (possibly edited) document the user reviewed."""
    reply = await database_sync_to_async(_reviewable_reply)(session, reply_id)
    if reply is None or not document.strip():
        return USED
    session = await database_sync_to_async(ChatSession.objects.get)(pk=session.pk)  # fresh figures
    agent = AgentSession(session)
    try:
        return await agent.switch(reply, document)
    except IntegrityError:  # another tab confirmed the same document a moment before
        return USED
    except Exception as exc:
        log.exception("confirming a reviewed handoff failed in session %s", session.pk)
        return str(await switch_failed(session, exc))


USED = "That handoff document can no longer be used: it already started a session."


def _reviewable_reply(session: ChatSession, reply_id: int) -> Entry | None:
    """The session's complete handoff document `reply_id`, if no session was started from it yet."""
    reply = Entry.objects.filter(
        pk=reply_id, session=session, status=Entry.Status.COMPLETE, data__purpose="handoff"
    ).first()
    if reply is None or ChatSession.objects.filter(handed_off_from=reply).exists():
        return None
    return reply


async def cancel(session_id: int) -> bool:
    """Ask the job running this session's generation, in whatever process, to stop (and a
    title being written for it in this one)."""
    stopped_title = stop_title(session_id)
    channel = await database_sync_to_async(
        lambda: (
            ChatSession.objects.filter(pk=session_id)
            .values_list("generation_channel", flat=True)
            .first()
        )
    )()
    if not channel:
        return stopped_title
    await get_channel_layer().send(channel, {"type": "generation.cancel"})
    return True


def write_title_soon(session_id: int) -> None:
    """After a session's first reply: a generated title, when its owner prefers them, written
    beside the chat (sessions.titles); one at a time per session."""
    if session_id in _titles:
        return
    task = asyncio.create_task(_write_title(session_id))
    _titles[session_id] = task
    task.add_done_callback(lambda _: _titles.pop(session_id, None))


async def _write_title(session_id: int) -> None:
    start = await database_sync_to_async(titles.wanted)(session_id)
    if start is None:
        return
    try:
        title = await titles.write(start, titles.title_provider())
    except (ProviderError, TimeoutError) as error:
        log.info("no title for session %s: %s", session_id, error)
        return
    html = await database_sync_to_async(_save_title)(start, title)
    if html:
        await show_in_tabs(session_id, html)


def _save_title(start: titles.Wanted, title: str) -> str:
    renamed = titles.save(start, title)
    return partials.title(renamed) if renamed else ""


def stop_title(session_id: int) -> bool:
    """Stop writing the session's title, if this process is writing it."""
    task = _titles.get(session_id)
    if task is None:
        return False
    task.cancel()
    return True


async def request_snapshot(channel: str, reply_to: str) -> None:
    with contextlib.suppress(Exception):
        await get_channel_layer().send(
            channel, {"type": "generation.snapshot_request", "reply_to": reply_to}
        )


async def wait_idle(timeout: float = 30) -> None:
    """Wait for this process's jobs, and the titles they started, to end (tests, shutdown)."""
    async with asyncio.timeout(timeout):
        while running := [*_jobs.values(), *_titles.values()]:
            await asyncio.gather(*running, return_exceptions=True)
