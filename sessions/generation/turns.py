"""Turns and the prompt queue: what a generation does next, each decided in one database call.

A prompt that finds its session idle claims it and is sent at once; one that finds a
generation running waits in the queue (`PendingPrompt`), which the running job empties turn
by turn before it releases the claim. A prompt is never stranded: it is either seen by the
job's last look at the queue, or finds the claim released and starts a generation (B10)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, Exists, OuterRef, QuerySet, Subquery
from django.utils import timezone

from .. import mentions, prompting, status, store, todos, usage
from ..agent.session import TurnStart, turn_start
from ..models import (
    ChatSession,
    Entry,
    PendingPrompt,
    Preferences,
    Refused,
    appending,
)
from ..models.refusals import BUSY_BRANCHING
from ..models.session import UNCLAIMED
from ..prompting import Prompt
from ..providers import catalog
from ..sign_ins import Held
from ..statements import Returning, Statement, Update, sent_together
from ..tallies import sending_reads
from ..tokens import estimate_tokens
from .caps import over_a_cap
from .claims import claim, claiming, release, taking_free_and_reading
from .events import StatusShown, TranscriptShown
from .thresholds import LEAF_IF_UNHINDERED, handoff_due

AUTO_HANDOFF = (
    "The next message would fill the context window past your automatic handoff setting: "
    "handing off first (Cancel sends it in this session instead)."
)
NOT_EDITABLE = "Only a message you wrote can be edited."
NOT_REGENERABLE = "Only a reply to a message can be regenerated."


@dataclass(frozen=True)
class Turn:
    """What a job does next, as one database call decided it."""

    text: str = ""  # the prompt to send, its template expanded; empty: nothing is left
    user: Entry | None = None  # the prompt, already stored as the session's user message
    handoff: bool = False  # the automatic handoff comes first
    status: StatusShown | None = None  # the status line as the prompt begins (or the job ends)
    regenerate: bool = False  # another reply to the message the session's leaf is at
    go_on: bool = False  # the reply at the leaf, stopped at its maximum length, goes on
    ready: TurnStart | None = None  # the todo notes and tools before the prompt's turn, read


@dataclass(frozen=True)
class Submitted:
    """What became of a prompt (or /handoff): refused, sent, or queued behind the reply that
    is running."""

    refusal: str = ""  # why it was not taken (a cap): what was typed goes back to its box
    busy: str = ""  # a /handoff not taken: a generation runs already
    queued: StatusShown | None = None  # the status line, when it waits behind a running reply
    unchecked: bool = False  # the caller's check said no: nothing was done


def queue_prompt(
    session: ChatSession,
    text: str,
    generation_id: str,
    channel: str,
    check: Callable[[], bool] | None = None,
    held: Held | None = None,
    attached: Sequence[int] = (),
) -> tuple[Submitted, tuple[ChatSession, Turn] | None]:
    """A prompt in one database call: refused over a cap, else queued; and when no generation
    runs, the session claimed and the job's first turn taken, ready to send. `check`, when
    given, runs first (the caller's own reads: a frame's check) and may stop it; with `held`,
    only when it must.

    `held` (with `check`): the caller's sign-in as it last held. The claim's statement then
    makes the check itself (the session kept, the sign-in unchanged), and `check` runs only
    when the prompt is not claimed at once: under a burst of prompts, a round trip and a
    statement fewer for each (docs/PERFORMANCE.md).
    """

    def stopped() -> bool:
        return check is not None and not check()

    if held is None and stopped():
        return Submitted(unchecked=True), None
    try:
        prompt = prompting.prompt_of(session, text, attached)  # and the files `attached`
    except Refused as refused:
        if held is not None and stopped():
            return Submitted(unchecked=True), None
        return Submitted(refusal=str(refused)), None
    # The common case in one transaction: the session free, its owner under the cap (and, with
    # `held`, the frame's check), the prompt stored and the turn's reads.
    taking = CLAIMED_IF_FREE if held is None else CLAIMED_IF_FREE_AND_HELD
    claimed, turn = _claimed_and_begun(taking, session, prompt, generation_id, channel, held)
    if claimed is not None and turn is not None:
        return Submitted(), (claimed, turn)
    if claimed is None and held is not None and stopped():
        return Submitted(unchecked=True), None
    if claimed is None:  # busy, a lapsed claim, or the owner at the cap: which, and its words
        if refusal := over_a_cap(session, queueing=True):
            return Submitted(refusal=refusal), None
        if claim(session.pk, generation_id, "prompt", channel):
            claimed = AS_CLAIMED.one(session_id=session.pk)
    if claimed is not None:
        queued, auto_at = bool(getattr(claimed, "queued", False)), getattr(claimed, "auto_at", None)
        turn = first_turn(claimed, prompt, generation_id, queued=queued, auto_at=auto_at)
        return Submitted(), (claimed, turn)
    prompt.queue(session.pk)
    # Queued before the running job's last look at the queue, or after its release: then the
    # claim is free now. Either way the prompt is sent (B10: never stranded).
    if claim(session.pk, generation_id, "prompt", channel):
        claimed = ChatSession.objects.get(pk=session.pk)
        return Submitted(), (claimed, next_turn(claimed, generation_id, auto_handoff=True))
    return Submitted(queued=StatusShown(*status.read_by_id(session.pk))), None


def _as_claimed(session_id: int) -> tuple[ChatSession, bool, int | None]:
    """The session after its claim, whether prompts wait, its owner's threshold: one query."""
    claimed = AS_CLAIMED.one(session_id=session_id)
    return claimed, bool(getattr(claimed, "queued", False)), getattr(claimed, "auto_at", None)


def _claimed(session_id: int) -> QuerySet[ChatSession, Any]:
    """The session, whether prompts are queued in it, and its owner's preferences a turn asks
    (subqueries, not a join: `CLAIMED_IF_FREE` reads it in a RETURNING clause)."""
    return ChatSession.objects.annotate(
        queued=Exists(PendingPrompt.objects.filter(session_id=OuterRef("pk"))),
        auto_at=_owners("auto_handoff_at"),
        recalls_everywhere=_owners("recall_everywhere"),  # what `recall.offered` asks
        proposes_handoff=_owners("propose_handoff"),  # and `handoff_tool.proposes`
        owner_instructions=_owners("instructions"),  # the system prompt (`AgentSession.load`)
    ).filter(pk=session_id)


def _owners(preference: str) -> Subquery:  # the owner's (None when they have set none)
    return Subquery(Preferences.objects.filter(user_id=OuterRef("owner_id")).values(preference))


_FLAGS = {name: BooleanField() for name in ("queued", "recalls_everywhere", "proposes_handoff")}
AS_CLAIMED: Statement[ChatSession] = Statement(_claimed, columns=_FLAGS, session_id=int)
CLAIMED_IF_FREE = taking_free_and_reading(_claimed, columns=_FLAGS)
CLAIMED_IF_FREE_AND_HELD = taking_free_and_reading(_claimed, columns=_FLAGS, signed_in=True)


def first_turn(
    session: ChatSession, prompt: Prompt, generation_id: str, *, queued: bool, auto_at: int | None
) -> Turn:
    """The turn of a prompt that found its session idle and claimed it (`session` as read after
    the claim, with whether prompts are `queued` and the owner's threshold `auto_at`): sent at
    once, without passing through the queue, unless prompts queued before it go first or the
    automatic handoff is due (the prompt then waits in the queue)."""
    due = bool(auto_at) and handoff_due(session, auto_at or 0, prompt.text)
    if queued or due:
        prompt.queue(session.pk)
        return next_turn(session, generation_id, auto_handoff=True)
    return _begin(session, prompt, reread=False, queued=0)


def _claimed_and_begun(
    taking: Returning[ChatSession],
    session: ChatSession,
    prompt: Prompt,
    generation_id: str,
    channel: str,
    held: Held | None,
) -> tuple[ChatSession | None, Turn | None]:
    """`claim_free` and, when it takes the claim, `first_turn`'s common case, together: the
    prompt stored at once if the claim holds and nothing comes before it (a prompt queued,
    the automatic handoff), and the turn's reads. One round trip and one transaction on
    PostgreSQL, where the claim was a round trip and a commit of its own before the rest
    (docs/PERFORMANCE.md). Returns the session as claimed (None: not claimed) and the turn
    (None: the prompt was not stored, and `first_turn` decides)."""
    unhindered = {
        "session_id": session.pk,
        "generation_id": generation_id,
        "model": session.model,
        "window": catalog.spec(session.model).window,
        "tokens": estimate_tokens(prompt.text) * 100,
    }
    with sent_together():
        claim = claiming(session.pk, generation_id, "prompt", channel, held)
        taken = taking.sending_objects(**claim)
        stored = appending.sending_if(
            session.pk,
            (LEAF_IF_UNHINDERED, unhindered),
            title=prompt.title,
            kind=Entry.Kind.MESSAGE,
            role=Entry.Role.USER,
            content=prompt.content,
            data=prompt.data,
        )
        ahead = sending_reads(session, *TALLIED_AT_A_TURN)
    claimed = next(iter(taken()), None)
    user = stored()
    if claimed is None or user is None:
        with ahead:  # read, and dropped
            return claimed, None
    appending.joined(claimed, user, prompt.title)
    return claimed, _turn(claimed, claimed, prompt.text, user, ahead, queued=0)


def next_turn(session: ChatSession, generation_id: str, *, auto_handoff: bool) -> Turn:
    """The automatic handoff when it is due; else the oldest queued prompt, stored as the
    session's next user message (or the claim released when none is left).

    At a reply's end with nothing queued, the common case, the claim is released in one
    statement on that condition and the status line read after it: one round trip on
    PostgreSQL, where looking at the queue first made nine. (That statement reads the queue
    before it locks the row: the job's end reads it again once this is committed,
    `api._after_release`.)
    """
    with sent_together():
        released = RELEASED_IF_IDLE.sending_count(
            session_id=session.pk, generation_id=generation_id
        )
        shown = status.sending(session)
    if released():
        return Turn(status=StatusShown(*shown()))
    # A prompt is queued (or the claim was lost): look at the queue under the session's lock.
    if auto_handoff and auto_handoff_due(session.pk):
        return Turn(handoff=True)
    pending = next_prompt_or_release(session.pk, generation_id)
    if pending is None:  # released: the status as the job ends
        return Turn(status=StatusShown(*status.read_by_id(session.pk)))
    return _begin(session, prompting.queued_prompt(session, pending), reread=True)


def _begin(
    session: ChatSession, prompt: Prompt, *, reread: bool, queued: int | None = None
) -> Turn:
    """The prompt stored as the session's next user message; the status line as it starts; and
    what comes before its turn (todo notes, tools), so the job need not ask again.
    `session` was read as its claim was taken; a later turn's rereads it (the claim's lease and
    kind have moved since). `queued`: the prompts waiting, when known (a first turn sent at
    once found none)."""
    with sent_together():  # the prompt stored and the reads after it: one round trip, were four
        stored = appending.sending(
            session,
            title=prompt.title,
            kind=Entry.Kind.MESSAGE,
            role=Entry.Role.USER,
            content=prompt.content,
            data=prompt.data,
        )
        ahead = sending_reads(session, *TALLIED_AT_A_TURN)
    user = stored()
    shown = ChatSession.objects.get(pk=session.pk) if reread else session
    return _turn(session, shown, prompt.text, user, ahead, queued=queued)


def _turn(
    session: ChatSession,
    shown: ChatSession,
    text: str,
    user: Entry,
    ahead: AbstractContextManager[None],
    *,
    queued: int | None,
) -> Turn:
    """The turn of prompt `user`, stored: the status line as `shown` (`session` as the turn
    starts) gives it, and the todo notes and tools before it, from the reads `ahead`."""
    with ahead:
        shown_status = StatusShown(shown, status.read(shown, queued=queued))
        return Turn(text, user, status=shown_status, ready=turn_start(session))


# What a turn's start reads of the session's entries: its cost (the status line), its todo
# list's changes and the sessions it mentions (what comes before the turn).
TALLIED_AT_A_TURN = (usage.SUMMED, todos.CHANGED, mentions.MENTIONED)


def next_prompt_or_release(session_id: int, generation_id: str) -> PendingPrompt | None:
    """Pop the oldest queued prompt, or release the claim when none is left, atomically: a
    prompt queued by another tab is seen here or finds the claim released (never stranded)."""
    with transaction.atomic(savepoint=False):  # the caller's transaction, if any, is as good
        held = HELD.rows(session_id=session_id, generation_id=generation_id)
        if not held:
            return None
        pending = oldest_queued(session_id)
        if pending is None or held[0][0] is not None:  # none left, or the session was deleted
            release(session_id, generation_id)
            return None
        pending.delete()
        ChatSession.objects.filter(pk=session_id).update(
            generation_kind="prompt", generation_started_at=timezone.now()
        )
        return pending


def oldest_queued(session_id: int) -> PendingPrompt | None:
    return next(iter(OLDEST_QUEUED.objects(session_id=session_id)), None)


OLDEST_QUEUED: Statement[PendingPrompt] = Statement(
    lambda session_id: PendingPrompt.objects.filter(session_id=session_id).order_by("id")[:1],
    session_id=int,
)
RELEASED_IF_IDLE: Update[ChatSession] = Update(  # the claim given up, when no prompt waits
    lambda session_id, generation_id: (
        ChatSession.objects.filter(pk=session_id, generation_id=generation_id).filter(
            ~Exists(PendingPrompt.objects.filter(session_id=OuterRef("pk")))
        ),
        UNCLAIMED,
    ),
    session_id=int,
    generation_id=str,
)
HELD: Statement[ChatSession] = Statement(  # whether the claim holds, and the session is kept
    lambda session_id, generation_id: (
        ChatSession.objects.select_for_update()
        .filter(pk=session_id, generation_id=generation_id)
        .values_list("deleted_at")
    ),
    session_id=int,
    generation_id=str,
)


def release_and_status(session_id: int, generation_id: str) -> StatusShown:
    """Release the claim (if the job still holds it), and the status line after."""
    release(session_id, generation_id)
    return StatusShown(*status.read_by_id(session_id))


def auto_handoff_due(session_id: int, text: str | None = None) -> bool:
    """Whether the oldest queued prompt (or `text`) would take the context past the owner's
    threshold."""
    session, queued, threshold_percent = _as_claimed(session_id)
    if not threshold_percent:
        return False
    if text is None:
        pending = oldest_queued(session_id) if queued else None
        if pending is None:
            return False
        text = pending.text
    return handoff_due(session, threshold_percent, text)


def begin_branch(
    session: ChatSession, entry_id: int, text: str | None, generation_id: str, channel: str
) -> str | tuple[ChatSession, Turn, TranscriptShown]:
    """An edit (`text`: the message's new wording) or a regeneration (`text` None) of entry
    `entry_id`, in one database call: the session claimed, its leaf moved to the entry's
    parent (the new message or reply goes beside the old one), and the job's first turn.

    Returns a refusal, or the session as claimed, the turn, and the transcript as it is
    now (before the new message), for every tab.
    """
    refusal = over_a_cap(session, queueing=True)
    if refusal:
        return refusal
    try:
        prompt = None if text is None else prompting.prompt_of(session, text)
    except Refused as refused:
        return str(refused)
    target = Entry.objects.filter(pk=entry_id, session_id=session.pk).first()
    problem = _not_branchable(target, editing=prompt is not None)
    if problem:
        return problem
    assert target is not None
    with transaction.atomic():  # claimed and moved, or neither
        if not claim(session.pk, generation_id, "prompt", channel):
            return BUSY_BRANCHING
        claimed = ChatSession.objects.get(pk=session.pk)
        claimed.move_leaf(target.parent_id, generation_id=generation_id)
        if prompt is None:
            shown = StatusShown(claimed, status.read(claimed))
            return claimed, Turn(regenerate=True, status=shown), TranscriptShown(claimed)
        turn = _begin(claimed, prompting.keeping_files(prompt, target), reread=False)
    assert turn.user is not None
    turn.user.siblings = store.siblings(turn.user)
    return claimed, turn, TranscriptShown(claimed, before=turn.user.pk)


def _not_branchable(entry: Entry | None, *, editing: bool) -> str:
    """Why this entry cannot be edited (or regenerated): empty when it can."""
    if editing:
        mine = entry is not None and entry.kind == Entry.Kind.MESSAGE and entry.role == "user"
        return "" if mine and entry and not entry.purpose else NOT_EDITABLE
    reply = entry is not None and entry.kind == Entry.Kind.MESSAGE and entry.role == "assistant"
    if not reply or not entry or entry.purpose or entry.parent_id is None:
        return NOT_REGENERABLE
    asked = Entry.objects.filter(pk=entry.parent_id, kind=Entry.Kind.MESSAGE).values_list(
        "role", flat=True
    )
    return "" if asked.first() in (Entry.Role.USER, Entry.Role.TOOL_RESULT) else NOT_REGENERABLE
