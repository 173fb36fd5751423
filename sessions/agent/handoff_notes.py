"""A handoff's notes: when a session is too long for the model's window, its older stretches
are summarised first, each notes request streamed and cancellable like a reply, and kept in
the session as a `handoff_notes` entry (see window.py for the plan)."""

from __future__ import annotations

import asyncio
import math

from channels.db import database_sync_to_async

from .. import context, handoff, window
from ..context import ASSISTANT, USER
from ..models import ChatSession, Entry
from ..providers import ProviderError
from ..tokens import estimate_tokens
from .events import Emit
from .streamer import Reply, Streamer

NOTES = "handoff_notes"  # a handoff's notes on a stretch too long to send whole


class Notes:
    """The notes of one handoff, taken with the agent's streamer."""

    def __init__(self, session: ChatSession, streamer: Streamer, emit: Emit) -> None:
        self.session = session
        self.streamer = streamer
        self.emit = emit

    async def take(self, plan: window.Plan, prompt_text: str) -> str:
        """Notes on each stretch the plan could not send whole. Notes too long for the final
        request are themselves summarised, at most three rounds deep. Returns "" when
        cancelled (the reply that follows sees the abort)."""
        spec = self.streamer.provider.spec
        room = max(1, spec.budget - plan.size(prompt_text) - 64)
        limit = window.chunk_budget(spec.budget, handoff.NOTES_PROMPT)
        chunks = list(plan.chunks)
        joined = ""
        for depth in range(3):
            per_chunk = max(256, min(spec.max_output, room // len(chunks)))
            notes: list[str] = []
            index = 0
            while index < len(chunks):
                text = await self.on(chunks, index, per_chunk, depth)
                if self.streamer.aborted:
                    return ""
                if text is not None:
                    notes.append(f"### Part {index + 1} of {len(chunks)}\n\n{text}")
                    index += 1
            joined = "\n\n".join(notes)
            if math.ceil(estimate_tokens(joined) * plan.scale) <= room:
                return joined
            notes_parts = [context.Part(USER, note, "notes") for note in notes]
            chunks = window.rechunk(notes_parts, limit, plan.scale)
        return context.excerpt(joined, int(room * 3 / plan.scale))

    async def on(
        self, chunks: list[list[context.Part]], index: int, max_tokens: int, depth: int
    ) -> str | None:
        """Stream the notes on one stretch. None: the model found it too long, so it was split
        in two in `chunks` (take the notes again at the same index)."""
        chunk = chunks[index]
        text = handoff.notes_request(context.serialize(chunk), index + 1, len(chunks), depth)
        request = [{"role": USER, "content": [{"type": "text", "text": text}]}]
        stage = f"part {index + 1} of {len(chunks)}"
        reply = Reply()
        self.streamer.purpose, self.streamer.stage = NOTES, stage
        await self.emit("message_start", role=ASSISTANT, purpose=NOTES, stage=stage)
        streamed = await self.streamer.stream(self.session, reply, request, max_tokens=max_tokens)
        if reply.error_kind == "too_long" and not reply.text:
            chunks[index : index + 1] = window.split(chunk)
            await self.emit("message_end", role=ASSISTANT, purpose=NOTES)
            return None
        await self.streamer.settle_partial()
        if not self.streamer.keep:  # the claim was lost
            await self.emit("message_end", role=ASSISTANT, purpose=NOTES)
            return ""
        save = database_sync_to_async(self.session.append_custom)(
            NOTES,
            reply.text,
            data={"part": index + 1, "parts": len(chunks), "round": depth + 1},
            status=streamed.status,
            error=streamed.error,
            model=self.streamer.provider.model,  # what the round used counts where replies do
            input_tokens=reply.usage.input,
            output_tokens=reply.usage.output,
            cache_read_tokens=reply.usage.cache_read,
            cache_write_tokens=reply.usage.cache_write,
        )
        entry = await asyncio.shield(save)
        await self.emit("message_end", role=ASSISTANT, entry=entry, purpose=NOTES)
        if streamed.cancelled_from_outside:
            raise asyncio.CancelledError
        if streamed.status == Entry.Status.FAILED:
            raise ProviderError(streamed.error)
        return reply.text
