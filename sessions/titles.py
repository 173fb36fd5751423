"""Generated titles: with Claude, and when its owner prefers them, a session's first reply is
followed by a cheap call (AGENTWEB_TITLE_MODEL) for a short title.

The call runs beside the chat, never before or inside a reply (`write_soon`: a task of its
own, one at a time per session, which a Cancel stops). It replaces the title only while that
is still the one cut from the first message: a rename, before or during the call, wins.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import BooleanField, Exists, OuterRef, QuerySet

from foundation.database import NOT_ANSWERING

from . import store
from .content import text_of, title_from
from .models import ChatSession, Entry, Preferences
from .providers import LOCAL, Provider, ProviderError, TextDelta, catalog, claude
from .statements import Statement

log = logging.getLogger(__name__)

# What the title model is asked; the conversation's start follows it.
REQUEST = (
    "Write a title of at most six words for the conversation below, in its language. "
    "Reply with the title only: no quotes, no full stop, no markdown."
)
# How much of the first message and reply the title model reads.
EXCERPT = 2_000
MAX_TOKENS = 30
# A title call that has not answered by then is given up: the cut title stays.
TIMEOUT_SECONDS = 20.0
WORDS = 8  # a longer answer is cut to this many words
QUOTES = "\"'“”‘’«»`*#"


@dataclass(frozen=True)
class Wanted:
    """A session whose title a model should write: the start of its conversation, and the title
    it has now (cut from its first message), which the new one may replace."""

    session_id: int
    question: str
    answer: str
    current: str


def wanted(session_id: int) -> Wanted | None:
    """The session's conversation start, when it wants a generated title: its owner prefers
    them, it runs on Claude, its first reply is complete and nothing else has come after,
    and its title is still the one cut from its first message."""
    if not catalog.has_key():  # no title model to ask: nothing to read
        return None
    session = next(iter(WITH_PREFERENCE.objects(session_id=session_id)), None)
    if session is None or session.model == LOCAL:
        return None
    if not getattr(session, "prefers", False):  # read with the session: one query
        return None
    branch = [entry for entry in store.get_branch(session) if entry.kind == Entry.Kind.MESSAGE]
    questions = [entry for entry in branch if entry.role == Entry.Role.USER]
    if len(questions) != 1 or branch[-1].role != Entry.Role.ASSISTANT:
        return None  # not the first exchange (its reply may have called tools on the way)
    question, answer = questions[0], branch[-1]
    if answer.status != Entry.Status.COMPLETE:
        return None
    if session.title != title_from(question.text):
        return None  # renamed, or already generated
    return Wanted(
        session_id, question.text[:EXCERPT], text_of(answer.content)[:EXCERPT], session.title
    )


def _with_preference(session_id: int) -> QuerySet[ChatSession, Any]:
    """The session, and whether its owner prefers generated titles (a subquery: one query)."""
    prefers = Preferences.objects.filter(user_id=OuterRef("owner_id"), generate_titles=True)
    return ChatSession.objects.annotate(prefers=Exists(prefers)).filter(pk=session_id)


# Compiled once: read at the end of every session's first reply, on the one database thread.
WITH_PREFERENCE: Statement[ChatSession] = Statement(
    _with_preference, columns={"prefers": BooleanField()}, session_id=int
)


async def write(start: Wanted, provider: Provider) -> str:
    """The title the model writes for that conversation start, cleaned ("" when it wrote none)."""
    conversation = f"User: {start.question}\n\nAssistant: {start.answer}"
    messages = [{"role": "user", "content": f"{REQUEST}\n\n<conversation>\n{conversation}\n"}]
    parts: list[str] = []
    async with asyncio.timeout(TIMEOUT_SECONDS):
        async for event in provider.stream(messages, max_tokens=MAX_TOKENS):
            if isinstance(event, TextDelta):
                parts.append(event.text)
    return clean("".join(parts))


def clean(text: str) -> str:
    """A model's answer as a title: its first line, without quotes, markdown or a full stop,
    at most WORDS words and TITLE_LENGTH characters."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = re.sub(r"^\s*(title\s*:\s*)", "", line, flags=re.IGNORECASE)
    words = line.strip().strip(QUOTES).strip().rstrip(".。").strip(QUOTES).split()
    return title_from(" ".join(words[:WORDS]))


def save(start: Wanted, title: str) -> ChatSession | None:
    """Give the session its generated title, unless it was renamed (or deleted) meanwhile;
    the session as renamed, or None."""
    if not title:
        return None
    kept = ChatSession.objects.filter(ChatSession.kept(), pk=start.session_id, title=start.current)
    if not kept.update(title=title):
        return None
    return ChatSession.objects.get(pk=start.session_id)


def title_provider() -> Provider:
    """The cheap model that writes titles."""
    return claude(
        settings.AGENTWEB_TITLE_MODEL, max_tokens=MAX_TOKENS, stall_seconds=TIMEOUT_SECONDS
    )


_writing: dict[int, asyncio.Task[None]] = {}  # titles being written in this process, by session
Show = Callable[[ChatSession], Awaitable[None]]


def write_soon(session_id: int, show: Show) -> None:
    """After a session's first reply: a generated title, when its owner prefers them, written
    beside the chat and shown with `show`; one at a time per session."""
    if session_id in _writing:
        return
    task = asyncio.create_task(_write(session_id, show))
    _writing[session_id] = task
    task.add_done_callback(lambda _: _writing.pop(session_id, None))


async def _write(session_id: int, show: Show) -> None:
    """A title is worth a try, never an error: a model or a database that does not answer
    leaves the session its first words (a later reply does not try again)."""
    try:
        start = await database_sync_to_async(wanted)(session_id)
        if start is None:
            return
        title = await write(start, title_provider())
        renamed = await database_sync_to_async(save)(start, title)
    except (ProviderError, TimeoutError, *NOT_ANSWERING) as error:
        log.info("no title for session %s: %s", session_id, error)
        return
    if renamed is not None:
        await show(renamed)


def stop(session_id: int) -> bool:
    """Stop writing the session's title, if this process is writing it."""
    task = _writing.get(session_id)
    if task is None:
        return False
    task.cancel()
    return True


def being_written() -> list[asyncio.Task[None]]:
    return list(_writing.values())
