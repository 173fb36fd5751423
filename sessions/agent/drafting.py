"""Writing a handoff draft beside the chat (issue 55): after a reply ends in a session whose
context has passed its owner's share, the handoff document is written in the background, in
this process, with the request `/handoff` would send, and kept as the session's draft
(`sessions.drafts`). Nothing of it reaches the page or the transcript until `/handoff` uses
it. A message sent to the session cancels it at once: it never delays a reply."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from foundation.database import NOT_ANSWERING

from .. import context, drafts, store, window
from ..context import LLMMessage
from ..models import ChatSession, Entry
from ..providers import Provider, ProviderError, StreamEnd, TextDelta
from .handoff_run import request_of
from .provider import provider_for, writer_of
from .session import instructions_of
from .tools import offered_to

log = logging.getLogger(__name__)

Ready = Callable[[int], Awaitable[None]]  # told a session's draft is kept
_writing: dict[int, asyncio.Task[None]] = {}  # this process's drafts being written, by session


def write_soon(session_id: int, ready: Ready) -> None:
    """After a reply: the session's draft written beside the chat, when it is due, and `ready`
    called once it is kept; one at a time per session (across processes: the draft's lease)."""
    if session_id in _writing or not settings.AGENTWEB_HANDOFF_DRAFTS:
        return
    task = asyncio.create_task(_write(session_id, ready))
    _writing[session_id] = task
    task.add_done_callback(lambda _: _forget(session_id, task))


def cancel(session_id: int) -> None:
    """A message for the session, or a handoff of it: its draft stops here and now."""
    task = _writing.pop(session_id, None)
    if task is not None:
        task.cancel()


def being_written() -> list[asyncio.Task[None]]:
    return list(_writing.values())


def _forget(session_id: int, task: asyncio.Task[None]) -> None:
    if _writing.get(session_id) is task:
        del _writing[session_id]


def _claimed(session_id: int, writer: str) -> ChatSession | None:
    """The session, when its draft is due and this writer took its lease."""
    session = ChatSession.objects.filter(ChatSession.kept(), pk=session_id).first()
    if session is None or session.is_generating or not drafts.due(session):
        return None
    return session if drafts.claim(session, writer) else None


async def _write(session_id: int, ready: Ready) -> None:
    """A draft is worth a try, never an error: when the model or the database does not answer,
    the next /handoff writes its document as it goes (a lease not released here expires)."""
    writer = uuid.uuid4().hex
    try:
        session = await database_sync_to_async(_claimed)(session_id, writer)
        if session is None:
            return
        try:
            if await _unless_moved_on(_written(session, writer), session):
                await ready(session_id)
        finally:
            await asyncio.shield(database_sync_to_async(drafts.release)(session_id, writer))
    except ProviderError as error:
        log.info("session %s: no handoff draft: %s", session_id, error.reason)
    except NOT_ANSWERING as error:
        log.info("session %s: no handoff draft: the database did not answer: %s", session_id, error)


WATCH_EVERY = 0.5  # seconds between two looks at whether the session moved on elsewhere


async def _unless_moved_on(writing: Coroutine[Any, Any, bool], session: ChatSession) -> bool:
    """Whether the draft was kept, unless the session moves on meanwhile in any process (a
    prompt's claim, a new leaf): the writing then stops, its model connection closed. In this
    process `cancel` stops it at once; another process's prompt shows in the session's row."""
    work = asyncio.ensure_future(writing)
    watch = asyncio.ensure_future(_moved_on(session.pk, session.leaf_id))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()  # the stream's close closes the model connection
            with contextlib.suppress(asyncio.CancelledError):
                await work
    if work.cancelled():
        log.info("session %s: the draft stopped: the session moved on", session.pk)
        return False
    return work.result()


async def _moved_on(session_id: int, leaf: int | None) -> None:
    while not await database_sync_to_async(drafts.moved_on)(session_id, leaf):
        await asyncio.sleep(WATCH_EVERY)


async def _written(session: ChatSession, writer: str) -> bool:
    """Whether the draft was written and kept."""
    branch = await database_sync_to_async(store.get_branch)(session)
    provider = await writer_of(session, provider_for(session.model))
    request = await _request(session, branch, provider)
    if request is None:  # too long for one request: /handoff takes its notes as it goes
        return False
    messages, tools = request
    text: list[str] = []
    end = StreamEnd()
    system = await instructions_of(session)
    async for event in provider.stream(messages, system=system or None, tools=tools):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, StreamEnd):
            end = event
    document = "".join(text).strip()
    if not document or end.stop_reason != "end_turn":  # cut off, or a tool called: no draft
        return False
    keep = database_sync_to_async(drafts.keep)
    leaf = branch[-1].pk
    return bool(await keep(session.pk, writer, leaf, document, provider.model, end.usage))


async def _request(
    session: ChatSession, branch: list[Entry], provider: Provider
) -> tuple[list[LLMMessage], list[dict[str, Any]]] | None:
    """The draft's request and the tools it offers; None when the session is too long for one.

    A draft a few turns old is brought up to date by a short request (Claude's: the offline
    model writes its document from the whole context at no cost). Otherwise it is the request
    `/handoff` would send, with, where the API caches prompts, the tools the session's replies
    offer, though the draft calls none: it then begins as the session's last request did
    (tools, system, turns), which the cache holds already."""
    if not provider.spec.is_local:
        behind = await database_sync_to_async(drafts.behind)(
            session.pk, branch, provider.spec.budget
        )
        if behind is not None:
            return behind[1], []
    prompt_text, _ = await request_of(session, branch, "")
    plan = await window.fit(context.context_parts(branch), prompt_text, provider)
    if plan.chunks:
        return None
    offered = await offered_to(session, provider) if provider.caches_prompts else ()
    return plan.messages(prompt_text), [tool.definition for tool in offered]
