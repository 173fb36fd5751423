"""The relay: a job's events to every tab of its session, in order, numbered, batched.

Each event is rendered once (the job's `Render`) and sent to the channel-layer group of the
session as `agent.event`, numbered (generation, seq); a tab that sees a gap asks the job for a
snapshot and catches up (consumers.py). Streamed text is gathered into one delta per batch
interval (the reply's first delta goes at once), and finished markdown blocks go rendered. A
batch goes in the timer's own step, on agentweb's layers (which deliver without waiting) when
no task is publishing: no task and no sleep per batch, half of a delta's cost in the relay
(bench/relay_batches.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from foundation.database import short

from .. import status, tabs
from ..blocks import Blocks
from .events import BlocksClosed, Delta, Event, Live, Render, StatusShown, Thought


def batch_seconds(running: int) -> float:
    """How long streamed text waits to go out with more: the batch interval, or longer when so
    many generations run in this process that their batches would pass the relay's rate."""
    sharing = running / settings.AGENTWEB_RELAY_MESSAGES_PER_SECOND
    return max(settings.AGENTWEB_DELTA_BATCH_SECONDS, sharing)


class Relay:
    def __init__(
        self,
        generation_id: str,
        session_id: Callable[[], int],
        render: Render,
        running: Callable[[], int],
    ) -> None:
        self.generation_id = generation_id
        self.session_id = session_id  # the session now (a handoff moves the job to its new one)
        self.render = render
        self.running = running  # how many generations this process runs
        self.layer = get_channel_layer()
        # A layer that delivers a group message without waiting (agentweb's own: in memory, the
        # bus) is given each batch in the step that makes it: no task, no sleep per batch.
        self.send_now: Callable[[str, dict[str, Any]], None] | None = getattr(
            self.layer, "group_send_now", None
        )
        self.seq = 0
        # (entry id, html) of this run's latest entries, for snapshots; older ones a resyncing
        # tab reads from the database.
        self.appended: deque[tuple[int, str]] = deque(maxlen=50)
        self.status = ""  # the last status line, so a tab that resyncs sees it
        self.notice = ""  # the last notice, likewise
        self.pending_text = ""  # streamed text not yet sent: deltas go out in batches
        self.pending_thinking = ""  # streamed thinking not yet sent, batched the same way
        self.thinking_sent = ""  # the streaming reply's thinking as sent so far
        self.sent = Blocks()  # the streaming reply as sent so far (what snapshots show)
        self.flush_timer: asyncio.Handle | None = None  # the pending batch's send, when set
        self.flushing: set[asyncio.Task[None]] = set()  # a batch sent by a task, while it runs
        # (entry id, html) rendered and numbered ahead of the next message, which carries them
        # first: a turn's opening (status line, the prompt's entry) goes with its reply's card.
        self.ahead: list[tuple[int, str]] = []
        # One message at a time, in sequence order, even when tasks publish concurrently.
        self.publishing = asyncio.Lock()
        self.holders = 0  # tasks that hold `publishing` or wait for it

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        """`publishing`, held: what is sent meanwhile goes in sequence (a batch sent in a step of
        its own waits for every holder, and for every task waiting to hold it)."""
        self.holders += 1
        try:
            async with self.publishing:
                yield
        finally:
            self.holders -= 1

    # --- events ---------------------------------------------------------------------------
    async def publish(self, event: Event, *, entry_id: int = 0, to_session: int = 0) -> str:
        """Render the event and send it; its html."""
        html = self._rendered(event, entry_id)
        async with self.holding():
            await self._send(html, entry_id=entry_id, to_session=to_session)
        return html

    def publish_ahead(self, event: Event, *, entry_id: int = 0) -> None:
        """Render the event now and send it first in the next message (a turn's opening: the
        prompt's entry goes with its reply's card, one message to every tab, not three)."""
        self.ahead.append((entry_id, self._rendered(event, entry_id)))

    def _rendered(self, event: Event, entry_id: int) -> str:
        """The event's html; an entry's is kept for snapshots."""
        html = self.render(event)
        if entry_id:
            self.appended.append((entry_id, html))
        return html

    async def show_status(
        self,
        shown: StatusShown | None = None,
        *,
        notice: Event | None = None,
        ahead: bool = False,
        last: bool = False,
    ) -> None:
        """The status line, as given or as read now; and `notice`, when given, in the same
        message (a turn's start ends the notice shown: one message to every tab, not two).
        `ahead`: sent first in the next message, as `publish_ahead`; `last`: the job's last
        event (a tab waiting for a snapshot the job will never send reads the database)."""
        if shown is None:
            shown = StatusShown(*await short(status.read_by_id)(self.session_id()))
        self.status = self.render(shown)
        if notice is not None:
            self.notice = self.render(notice)
        html = self.notice + self.status if notice is not None else self.status
        if ahead:
            self.ahead.append((0, html))
            return
        async with self.holding():
            await self._send(html, last=last)

    async def notify(self, event: Event, *, to_session: int = 0) -> None:
        """A notice (or a review, or a switch) that a tab arriving later still sees."""
        self.notice = await self.publish(event, to_session=to_session)

    async def start_reply(self, live: Live) -> None:
        async with self.holding():
            self.sent, self.thinking_sent = Blocks(), ""
            await self._send(self.render(live))

    async def end_reply(self) -> None:
        """The streaming reply is gone (a call that left nothing to show)."""
        await self.flush()
        async with self.holding():
            await self._send(self.render(Live(None)))

    # --- streamed text --------------------------------------------------------------------
    def on_delta(self, text: str) -> None:
        """Streamed text, gathered into one delta per batch interval; a reply's first delta
        goes at once (the time to the first token is what a person waits for)."""
        first = not self.sent.text and not self.pending_text
        self.pending_text += text
        if self.flush_timer is None:
            self._flush_soon(first)

    def on_thinking(self, text: str) -> None:
        """Streamed thinking, batched as text is (its first delta goes at once too)."""
        first = not self.thinking_sent and not self.pending_thinking
        self.pending_thinking += text
        if self.flush_timer is None:
            self._flush_soon(first)

    def _flush_soon(self, first: bool) -> None:
        """The pending batch goes at the batch interval's end (a reply's first, at once)."""
        loop = asyncio.get_running_loop()
        if first:
            self.flush_timer = loop.call_soon(self._flush_due)
        else:
            self.flush_timer = loop.call_later(batch_seconds(self.running()), self._flush_due)

    def _flush_due(self) -> None:
        """The batch's time: sent in this step when nothing else is being published, else by a
        task that waits its turn."""
        self.flush_timer = None
        if self.send_now is not None and not self.holders:
            for html in self._batch():
                self.send_now(*self._next(html, 0, 0))
        else:
            task = asyncio.ensure_future(self.flush())
            self.flushing.add(task)
            task.add_done_callback(self.flushing.discard)

    async def flush(self) -> None:
        """Send the streamed text not sent yet, as one delta."""
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        async with self.holding():  # taken and sent as one step: a snapshot sees neither half
            for html in self._batch():
                await self._send(html)

    def _batch(self) -> list[str]:
        """The pending thinking and text, taken as sent: the messages that send them."""
        batch = []
        if self.pending_thinking:
            thought, self.pending_thinking = self.pending_thinking, ""
            self.thinking_sent += thought
            batch.append(self.render(Thought(thought)))
        if self.pending_text:
            text, self.pending_text = self.pending_text, ""
            finished = self.sent.add(text)  # markdown blocks this text ended
            if finished:
                batch.append(self.render(BlocksClosed(finished, self.sent.tail)))
            else:
                batch.append(self.render(Delta(text)))
        return batch

    # --- catching up ----------------------------------------------------------------------
    def snapshot(self, *, replying: bool, purpose: str, stage: str) -> dict[str, Any]:
        """Everything a tab needs to catch up to event `seq`: the text sent so far, not the batch
        still pending (it follows as the next delta). Called holding `publishing`."""
        live = Live(self.sent.text if replying else None, purpose, stage, self.thinking_sent)
        return {
            "type": "generation.snapshot",
            "gen": self.generation_id,
            "seq": self.seq,
            "session": self.session_id(),
            "entries": list(self.appended),
            "html": self.render(live) + self.status + self.notice,
        }

    async def _send(
        self, html: str, *, entry_id: int = 0, to_session: int = 0, last: bool = False
    ) -> None:
        """The next event in sequence, after what was published ahead of it (`ahead`: each part's
        entry id and html, in order); only ever called holding `publishing`."""
        group, message = self._next(html, entry_id, to_session)
        if last:
            message["last"] = True
        if self.send_now is not None:
            self.send_now(group, message)
        else:
            await self.layer.group_send(group, message)

    def _next(self, html: str, entry_id: int, to_session: int) -> tuple[str, dict[str, Any]]:
        """The next event's group and message, numbered."""
        self.seq += 1
        message = {
            "type": "agent.event",
            "gen": self.generation_id,
            "seq": self.seq,
            "entry": entry_id,
            "html": html,
        }
        if self.ahead:
            message["ahead"], self.ahead = self.ahead, []
        return tabs.session_group(to_session or self.session_id()), message
