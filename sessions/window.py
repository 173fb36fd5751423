"""What fits in the model's window: a handoff request that never overflows it.

The budget is the window minus the maximum output minus a margin. When the context plus
the handoff prompt is over it, the handoff still works. It degrades in steps, each
taken only when the one before is not enough:

1. clip the oldest tool results (and bash outputs) to a head-and-tail excerpt;
2. leave out the oldest turns kept from before the latest compaction (its summary,
   which already covers what came before them, stays first);
3. summarise in chunks: the older part of the conversation is cut into stretches
   that fit; each stretch gives notes, and the notes, with the latest turns that
   still fit, give the document.

Sizes are estimates (`tokens.estimate_tokens`); when a plan comes near the budget, the
model's own count (`Provider.count_tokens`, the API's count_tokens endpoint for
Claude) calibrates them, so a tokenizer denser than the estimate cannot overflow it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from . import handoff
from .context import USER, LLMMessage, Part, serialize, to_messages
from .providers import Provider, ProviderError
from .tokens import estimate_tokens, message_tokens

CLIPPED_RESULT_CHARS = 1_500  # what an old tool result keeps: its head and its tail
COUNT_FROM = 0.5  # ask the model to count once an estimate passes this share of the budget
MAX_CALIBRATIONS = 3
CLIPPABLE = ("tool_result", "bash")


@dataclass
class Plan:
    """The request a handoff sends, and how it was made to fit."""

    parts: list[Part]  # sent as they are, before the prompt (after any notes)
    chunks: list[list[Part]] = field(default_factory=list)  # to take notes on, oldest first
    clipped: int = 0  # tool results cut to an excerpt
    dropped: int = 0  # turns left out
    summarised_entries: int = 0  # entries covered by notes instead of sent whole
    scale: float = 1.0  # the model's tokens per estimated token

    def size(self, prompt: str, notes: str = "") -> int:
        """Estimated tokens of the request, in the model's tokens."""
        raw = sum(part.tokens for part in self.parts) + estimate_tokens(prompt + notes)
        return math.ceil(raw * self.scale)

    def messages(self, prompt: str, notes: str = "") -> list[LLMMessage]:
        lead = [Part(USER, notes, "notes")] if notes else []
        return to_messages([*lead, *self.parts, Part(USER, prompt, "text")])

    def report(self) -> list[str]:
        """What was done to make the request fit, in words for the handoff message."""
        lines = []
        if self.clipped:
            lines.append(
                f"Clipped {self.clipped:,} older tool output{'s' if self.clipped != 1 else ''} "
                "to their first and last lines."
            )
        if self.dropped:
            lines.append(
                f"Left out the {self.dropped:,} oldest turn{'s' if self.dropped != 1 else ''} "
                "kept from before the latest compaction (its summary was sent)."
            )
        if self.chunks:
            lines.append(
                f"Summarised the {self.summarised_entries:,} oldest entries in "
                f"{len(self.chunks)} part{'s' if len(self.chunks) != 1 else ''} first; the "
                "document was written from those notes and the latest turns."
            )
        return lines


def plan(parts: Sequence[Part], prompt: str, budget: int, scale: float = 1.0) -> Plan:
    """Make the context plus the prompt fit `budget` tokens, degrading as little as it can."""
    result = Plan(list(parts), scale=scale)
    if result.size(prompt) <= budget:
        return result
    _clip_oldest_results(result, prompt, budget)
    if result.size(prompt) <= budget:
        return result
    _leave_out_kept_turns(result, prompt, budget)
    if result.size(prompt) <= budget:
        return result
    return _summarise_in_chunks(result, prompt, budget)


async def fit(parts: Sequence[Part], prompt: str, provider: Provider) -> Plan:
    """`plan`, checked against the model's own count once it comes near the budget.

    The count is of the request itself, or of the first stretch's notes request when the
    plan summarises: when the model counts more than the estimate, every size is scaled
    up by that ratio and the plan is made again.
    """
    budget = provider.spec.budget
    result = plan(parts, prompt, budget)
    for _ in range(MAX_CALIBRATIONS):
        sample = sample_request(result, prompt)
        estimate = math.ceil(message_tokens(sample) * result.scale)
        if not result.chunks and estimate < budget * COUNT_FROM:
            return result
        try:
            counted = await provider.count_tokens(sample)
        except ProviderError:
            return plan(parts, prompt, budget, result.scale * 1.25)  # no count: more room
        if counted <= estimate:
            return result
        result = plan(parts, prompt, budget, result.scale * counted / estimate * 1.02)
    return result


def sample_request(result: Plan, prompt: str) -> list[LLMMessage]:
    """The request whose count tells how the model's tokens compare with the estimate."""
    if not result.chunks:
        return result.messages(prompt)
    first = result.chunks[0]
    request = handoff.notes_request(serialize(first), 1, len(result.chunks))
    return [{"role": USER, "content": [{"type": "text", "text": request}]}]


def chunk_budget(budget: int, prompt: str) -> int:
    """How much of a stretch one notes request may carry."""
    return max(256, budget - estimate_tokens(prompt) - 64)


# --- the three steps ---------------------------------------------------------------------
def _clip_oldest_results(result: Plan, prompt: str, budget: int) -> None:
    over = result.size(prompt) - budget
    for index, part in enumerate(result.parts):
        if over <= 0:
            return
        if part.kind in CLIPPABLE and len(part.text) > CLIPPED_RESULT_CHARS + 200:
            clipped = part.clipped(CLIPPED_RESULT_CHARS)
            over -= math.ceil((part.tokens - clipped.tokens) * result.scale)
            result.parts[index] = clipped
            result.clipped += 1


def _leave_out_kept_turns(result: Plan, prompt: str, budget: int) -> None:
    """Drop whole turns from the start of the kept stretch until the request fits."""
    kept = [i for i, part in enumerate(result.parts) if part.kept]
    if not kept:
        return
    first, last = kept[0], kept[-1]
    over = result.size(prompt) - budget
    cut = first
    while cut <= last and over > 0:
        turn_end = _turn_end(result.parts, cut, last + 1)
        over -= math.ceil(sum(p.tokens for p in result.parts[cut:turn_end]) * result.scale)
        result.dropped += 1
        cut = turn_end
    del result.parts[first:cut]


def _summarise_in_chunks(result: Plan, prompt: str, budget: int) -> Plan:
    """Keep the latest turns that fit in half the budget; the rest becomes stretches for notes."""
    parts = result.parts
    tail_budget = budget // 2
    start, size = len(parts), 0
    while start > 0:
        turn_start = _turn_start(parts, start - 1)
        turn = math.ceil(sum(p.tokens for p in parts[turn_start:start]) * result.scale)
        if size + turn + estimate_tokens(prompt) > tail_budget:
            break
        size += turn
        start = turn_start
    older, tail = parts[:start], parts[start:]
    return replace(
        result,
        parts=tail,
        chunks=rechunk(older, chunk_budget(budget, handoff.NOTES_PROMPT), result.scale),
        summarised_entries=len({part.entry_id for part in older}),
    )


def rechunk(parts: Sequence[Part], limit: int, scale: float = 1.0) -> list[list[Part]]:
    """Consecutive parts grouped into stretches of at most `limit` tokens each."""
    chunks: list[list[Part]] = [[]]
    size = 0
    for part in parts:
        part = _fit_part(part, limit // 2, scale)
        tokens = math.ceil(part.tokens * scale)
        if chunks[-1] and size + tokens > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(part)
        size += tokens
    return [chunk for chunk in chunks if chunk]


def split(chunk: Sequence[Part]) -> list[list[Part]]:
    """A stretch the model found too long, in two halves (a single part: cut to half its size)."""
    if len(chunk) > 1:
        middle = len(chunk) // 2
        return [list(chunk[:middle]), list(chunk[middle:])]
    return [[chunk[0].clipped(len(chunk[0].text) // 2)]]


def _fit_part(part: Part, limit: int, scale: float) -> Part:
    """A single part larger than a chunk can hold is cut to an excerpt that fits."""
    if math.ceil(part.tokens * scale) <= limit:
        return part
    return part.clipped(max(200, int(len(part.text) * limit / (part.tokens * scale) * 0.9)))


def _is_turn_start(part: Part) -> bool:
    return part.role == USER and part.kind in ("text", "custom", "summary", "branch_summary")


def _turn_end(parts: Sequence[Part], start: int, stop: int) -> int:
    index = start + 1
    while index < stop and not _is_turn_start(parts[index]):
        index += 1
    return index


def _turn_start(parts: Sequence[Part], index: int) -> int:
    while index > 0 and not _is_turn_start(parts[index]):
        index -= 1
    return index
