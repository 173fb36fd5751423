"""The engine's public surface: what the consumer calls to start, submit, branch, cancel,
confirm and catch up. Each takes the page's `Render` where a job may start: the engine
publishes typed events, and the caller says how the page shows them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Sequence

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import IntegrityError

from foundation.database import short, until_it_answers

from .. import shapes, status, tabs, titles
from ..agent import AgentSession, drafting
from ..agent.handoff_run import switch_failed
from ..forms import Frame
from ..models import ChatSession, Entry, PendingPrompt, Refused, ToolQuestion
from ..providers import catalog
from ..sign_ins import Held
from .caps import over_a_cap
from .claims import claim, claim_of, expire, take_back
from .events import Render, StatusShown
from .going_on import begin_going_on
from .job import RUNNING, Job
from .turns import Submitted, begin_branch, queue_prompt

log = logging.getLogger(__name__)

ANSWERED_ALREADY = "That question was answered already, or is not this session's."
BUSY = "A handoff or reply is already running in this session: wait for it or cancel it."
USED = "That handoff document can no longer be used: it already started a session."
LEASE_MARGIN = 0.2  # seconds past a lease's end before its claim counts as left
WATCHING: dict[int, asyncio.Task[None]] = {}  # the watched claims of this process, by session
TAKING_BACK: set[asyncio.Future[None]] = set()  # claims of jobs that died, being taken back
AFTER_RELEASE: set[asyncio.Future[None]] = set()  # queues read again as their jobs end


async def start(
    session: ChatSession,
    kind: str,
    render: Render,
    handoff_focus: str | None = None,
    handoff_model: str = "",
    in_place: bool = False,
) -> bool:
    """Claim the session and run a job in this process; False if one already runs.
    `handoff_model`: the model the handoff's new session runs on ("": the session's own);
    `in_place`: /compact instead."""
    drafting.cancel(session.pk)  # a draft written beside the chat never delays anything
    generation_id, channel = await _new_generation()
    if not await database_sync_to_async(claim)(session.pk, generation_id, kind, channel):
        return False
    session = await database_sync_to_async(ChatSession.objects.get)(pk=session.pk)
    _launch(Job(session, generation_id, channel, render), handoff_focus, handoff_model, in_place)
    return True


async def submit(
    session: ChatSession,
    text: str,
    render: Render,
    check: Callable[[], bool] | None = None,
    held: Held | None = None,
    attached: Sequence[int] = (),
) -> Submitted:
    """Queue the prompt (with the files `attached`), and start a generation unless one runs
    (the prompt then waits). `check`: the caller's reads, made in the same database call (a
    frame's check); when it says no, nothing is done (`unchecked`). `held`: the sign-in as it
    last held, which the claim then requires (`queue_prompt`)."""
    drafting.cancel(session.pk)
    generation_id, channel = await _new_generation()
    submitted, claimed = await short(queue_prompt)(
        session, text, generation_id, channel, check, held, attached
    )
    if claimed is not None:
        _launch(Job(claimed[0], generation_id, channel, render, turn=claimed[1]))
    return submitted


async def branch_and_reply(
    session: ChatSession, entry_id: int, text: str | None, render: Render
) -> str:
    """Edit a message you wrote (`text`: its new wording) or regenerate a reply (`text` None):
    the new message or reply goes on a branch beside the old one, which every tab now shows,
    and the model replies there. Returns a refusal, or an empty string."""
    drafting.cancel(session.pk)
    generation_id, channel = await _new_generation()
    begun = await database_sync_to_async(begin_branch)(
        session, entry_id, text, generation_id, channel
    )
    if isinstance(begun, str):
        return begun
    claimed, turn, transcript = begun
    await tabs.show(session.pk, await database_sync_to_async(render)(transcript))
    _launch(Job(claimed, generation_id, channel, render, turn=turn))
    return ""


async def go_on(session: ChatSession, entry_id: int, render: Render) -> str:
    """Continue: the reply `entry_id`, stopped at its maximum length, goes on (a refusal, or
    an empty string)."""
    drafting.cancel(session.pk)
    generation_id, channel = await _new_generation()
    begun = await database_sync_to_async(begin_going_on)(session, entry_id, generation_id, channel)
    if isinstance(begun, str):
        return begun
    claimed, turn = begun
    _launch(Job(claimed, generation_id, channel, render, turn=turn))
    return ""


QUEUE_GONE = "That message is no longer queued: it was sent or removed."


async def change_queued(session: ChatSession, pk: int, text: str | None, render: Render) -> str:
    """Queued prompt `pk` given `text` (None: removed) before the job sends it, and every tab's
    queue shown after; or why not (a refusal)."""
    if not await database_sync_to_async(PendingPrompt.change)(session.pk, pk, text):
        return QUEUE_GONE
    shown = await database_sync_to_async(status.read_by_id)(session.pk)
    await tabs.show(session.pk, render(StatusShown(*shown)))
    return ""


async def on_entry(session: ChatSession, frame: Frame, render: Render) -> str:
    """A frame's action on one of its entries (`frame.entry`): `continue` a reply, or edit
    (`queue_edit`, to `frame.message`) or remove (`queue_remove`) a queued prompt. A refusal,
    or an empty string."""
    if frame.action == "continue":
        return await go_on(session, frame.entry or 0, render)
    text = frame.message if frame.action == "queue_edit" else None
    return await change_queued(session, frame.entry or 0, text, render)


async def start_handoff(
    session: ChatSession, focus: str, render: Render, model: str = "", in_place: bool = False
) -> Submitted:
    """/handoff (or /compact, `in_place`): a handoff job, unless a cap or a running generation
    stands in the way. The run itself checks there is something to hand off (H3). `model`: the
    new session's ("": the session's own)."""
    refusal = await database_sync_to_async(over_a_cap)(session, queueing=False)
    if refusal:
        return Submitted(refusal=refusal)
    if not await start(session, "handoff", render, focus, model, in_place):
        return Submitted(busy=BUSY)
    return Submitted()


async def start_if_queued(session: ChatSession, render: Render) -> None:
    """Send the prompts that waited (for a reviewed handoff), if any."""
    queued = await database_sync_to_async(session.pending_prompts.exists)()
    if queued:
        await start(session, "prompt", render)


async def confirm_handoff(
    session: ChatSession, reply_id: int, document: str, model: str = ""
) -> ChatSession | str:
    """B14: switch with the (possibly edited) document the user reviewed, to a session on
    `model` ("": as the handoff chose); the new session, or why not."""
    reply = await database_sync_to_async(_reviewable_reply)(session, reply_id)
    if reply is None or not document.strip():
        return USED
    if model and not catalog.is_offered(model):
        names = ", ".join(offered.id for offered in catalog.offered())
        return f"Unknown model “{model}”: choose one of {names}."
    session = await database_sync_to_async(ChatSession.objects.get)(pk=session.pk)  # fresh figures
    try:
        return await AgentSession(session).switch(reply, document, model)
    except IntegrityError:  # another tab confirmed the same document a moment before
        return USED
    except Exception as exc:
        log.exception("confirming a reviewed handoff failed in session %s", session.pk)
        return str(await switch_failed(session, exc))


def _reviewable_reply(session: ChatSession, reply_id: int) -> Entry | None:
    """The session's complete handoff document `reply_id`, if no session was started from it yet."""
    reply = Entry.objects.filter(
        pk=reply_id, session=session, status=Entry.Status.COMPLETE, data__purpose="handoff"
    ).first()
    if reply is None or shapes.part(reply.data, "handoff").get("compact"):
        return None  # a compaction's: the session itself went on from it
    if ChatSession.objects.filter(handed_off_from=reply).exists():
        return None
    return reply


async def cancel(session_id: int, channel: str) -> bool:
    """Ask the job running this session's generation, in whatever process, to stop (and a
    title being written for it in this one). False: nothing was running. `channel`: the job's,
    as the caller has just read it with the session's row ("" for none)."""
    stopped_title = titles.stop(session_id)
    if not channel:
        return stopped_title
    await get_channel_layer().send(channel, {"type": "generation.cancel"})
    return True


def stop(session_ids: list[int]) -> None:
    """`cancel`, from synchronous code (a view): these sessions' generations stop, wherever
    they run (their sessions were deleted)."""
    channels = ChatSession.objects.filter(pk__in=session_ids).values_list(
        "generation_channel", flat=True
    )
    send = async_to_sync(get_channel_layer().send)
    for channel in channels:
        if channel:
            send(channel, {"type": "generation.cancel"})


async def answer(session_id: int, question_id: int, answer: str, channel: str) -> None:
    """A tab's answer to a tool call's question of this session, stored once (the first answer
    wins, from whichever tab), and sent to the job that waits on it, in whatever process
    (`channel`: the job's, as the caller has just read it). `Refused` when it is no open
    question of this session."""
    if not await short(ToolQuestion.answer_once)(session_id, question_id, answer):
        raise Refused(ANSWERED_ALREADY)
    if channel:
        message = {"type": "generation.answer", "question": question_id, "answer": answer}
        await get_channel_layer().send(channel, message)


async def request_snapshot(channel: str, reply_to: str) -> None:
    """Ask the job on `channel` for everything a tab needs to catch up (sent to `reply_to`)."""
    with contextlib.suppress(Exception):
        await get_channel_layer().send(
            channel, {"type": "generation.snapshot_request", "reply_to": reply_to}
        )


async def wait_idle(timeout: float = 30) -> None:
    """Wait for this process's jobs, and the titles and drafts they started, to end (tests,
    shutdown)."""
    async with asyncio.timeout(timeout):
        while True:
            await asyncio.sleep(0)  # what a job's end begins (its draft) begins first
            running = [*RUNNING.values(), *AFTER_RELEASE, *titles.being_written()]
            running += drafting.being_written()
            if not running:
                return
            await asyncio.gather(*running, return_exceptions=True)


def watch(session_id: int, render: Render, holder: str = "") -> None:
    """Watch the session's claim, held by another process, until it is released or its lease
    runs out (issue 18, item 5): a claim whose process died is then taken over here, so the
    reply it was streaming shows at once as interrupted and the prompts queued behind it are
    sent, whether or not the server's start ran `recover_generations`. One watch per session
    per process; none for a claim this process holds (`holder`: the claim's generation, when the
    caller read it)."""
    if session_id not in WATCHING and holder not in RUNNING:
        task = asyncio.create_task(_watch(session_id, render))
        WATCHING[session_id] = task
        task.add_done_callback(lambda _: WATCHING.pop(session_id, None))


async def _watch(session_id: int, render: Render) -> None:
    """Through an outage too: a claim read that the database does not answer is tried again."""
    read = database_sync_to_async(claim_of)
    while claim := await until_it_answers(lambda: read(session_id)):
        generation_id, seconds_left = claim
        if generation_id in RUNNING:
            return  # this process runs it, and keeps it alive
        if seconds_left <= 0:
            session = await database_sync_to_async(ChatSession.objects.get)(pk=session_id)
            queued = await database_sync_to_async(session.pending_prompts.exists)()
            if not (queued and await start(session, "prompt", render)):
                await database_sync_to_async(expire)(session_id)
            log.warning("session %s: took over the claim of a process that stopped", session_id)
            await tabs.resync(session_id)
            return
        await asyncio.sleep(seconds_left + LEASE_MARGIN)


async def stop_all(timeout: float = 10) -> None:
    """Cancel this process's jobs and the titles they write, and wait for them to end: each
    keeps what it streamed, and gives up its claim (a server stopping; a test's teardown, so
    that nothing it left running reaches the next)."""
    running = [*RUNNING.values(), *WATCHING.values(), *AFTER_RELEASE, *titles.being_written()]
    running += drafting.being_written()
    for task in running:
        task.cancel()
    async with asyncio.timeout(timeout):
        await asyncio.gather(*running, return_exceptions=True)


async def _new_generation() -> tuple[str, str]:
    """A generation's id and the job's own channel. The channel has the layer's default
    prefix: channels-redis demultiplexes all of a process's channels from one list, and a
    channel of another prefix would starve the consumers."""
    return uuid.uuid4().hex, await get_channel_layer().new_channel()


def _launch(
    job: Job, handoff_focus: str | None = None, handoff_model: str = "", in_place: bool = False
) -> None:
    task = asyncio.create_task(job.run(handoff_focus, handoff_model, in_place))
    RUNNING[job.generation_id] = task
    task.add_done_callback(functools.partial(_ended, job))


def _ended(job: Job, task: asyncio.Task[None]) -> None:
    """A job's end. One that died (a fault its own handling did not catch) is said in the log,
    and this process takes its claim back at once, as a dead process's would be once its lease
    ran out: the reply kept as interrupted, and the prompts queued behind it sent."""
    RUNNING.pop(job.generation_id, None)
    if task.cancelled() or task.exception() is None:
        if job.closing_status is not None:  # released on the condition that nothing waited
            after = asyncio.ensure_future(_after_release(job.session_id, job.relay.render))
            AFTER_RELEASE.add(after)
            after.add_done_callback(AFTER_RELEASE.discard)
        elif not job.lost:
            _idle(job.session_id, job.relay.render)
        return
    log.error("generation %s died", job.generation_id, exc_info=task.exception())
    taking = asyncio.ensure_future(_take_back(job.session_id, job.generation_id, job.relay.render))
    TAKING_BACK.add(taking)
    taking.add_done_callback(TAKING_BACK.discard)


def _idle(session_id: int, render: Render) -> None:
    """The session is idle: ready for /handoff (a draft), its tabs told."""
    drafting.write_soon(session_id, functools.partial(_status_shown, render))


async def _after_release(session_id: int, render: Render) -> None:
    """A job's end released its claim on the condition that no prompt waited, in one statement
    whose view of the queue PostgreSQL takes before its lock on the session: a prompt queued
    in between, whose own claim still met the job's, waits with no one to send it. The queue
    is read once more now that the release is committed, and what waits is sent."""
    waiting = short(PendingPrompt.objects.filter(session_id=session_id).exists)
    if await until_it_answers(waiting):  # as the release did, it waits out an outage
        await start(ChatSession(pk=session_id), "prompt", render)
    else:
        _idle(session_id, render)


async def _status_shown(render: Render, session_id: int) -> None:
    """The session's status line read now, shown in its tabs (a handoff draft is ready)."""
    shown = StatusShown(*await short(status.read_by_id)(session_id))
    await tabs.show(session_id, render(shown))


async def _take_back(session_id: int, generation_id: str, render: Render) -> None:
    took = await until_it_answers(
        lambda: database_sync_to_async(take_back)(session_id, generation_id)
    )
    if took:
        await tabs.resync(session_id)
        session = await database_sync_to_async(ChatSession.objects.get)(pk=session_id)
        await start_if_queued(session, render)
