"""What replies cost: tokens and dollars, per reply, per session and per chain of handoffs.

Prices are per million tokens (`AGENTWEB_PRICES`); the prompt cache's reads and writes are
priced apart from plain input, as the API reports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Max, QuerySet, Sum

from .models import ChatSession, Entry
from .statements import Statement
from .tokens import Usage

MILLION = Decimal(1_000_000)


def priced(model: str, input: int, output: int, cache_read: int = 0, cache_write: int = 0) -> Usage:
    """These tokens of `model`, with their cost (None when the model has no price)."""
    price = settings.AGENTWEB_PRICES.get(model)
    cost = None
    if price is not None:
        cost = (
            sum(
                Decimal(str(price.get(name, 0))) * tokens
                for name, tokens in (
                    ("input", input),
                    ("output", output),
                    ("cache_read", cache_read),
                    ("cache_write", cache_write),
                )
            )
            / MILLION
        )
    return Usage(input, output, cache_read, cache_write, cost)


def of_reply(entry: Entry) -> Usage:
    return priced(
        entry.model,
        entry.input_tokens,
        entry.output_tokens,
        entry.cache_read_tokens,
        entry.cache_write_tokens,
    )


def of_sessions(session_ids: Iterable[int]) -> dict[int, Usage]:
    """Every session's total over all its replies, on every branch (each was paid for): one
    query, grouped by session and model."""
    ids = list(session_ids)
    totals = {pk: Usage() for pk in ids}
    rows = _by_model(Entry.objects.filter(session_id__in=ids)).values_list("session_id", *SUMS)
    for session_id, model, *tokens in rows:
        if used := _priced(model, tokens):
            totals[session_id] += used
    return totals


def of_session(session: ChatSession) -> Usage:
    """One session's total (`of_sessions`), as the process last summed it and the replies
    written since: every status line a prompt shows reads it, and summing a long session anew
    each time read every reply it has (4 ms at 10,000 entries on SQLite, 8 on PostgreSQL).

    A reply's tokens never change once written, and a session's entries are written in order
    of their ids (each append holds the session's row), so the replies with a greater id than
    the last one summed are the new ones; entries are only deleted with their session. A
    session is known by its id and its creation time: a database emptied and filled again (a
    test's) gives old ids to new sessions."""
    known = (session.pk, session.created_at)
    through, sums = _summed.get(known, (0, ()))
    rows = SINCE.rows(session_id=session.pk, after=through)
    if rows:
        by_model: dict[str, tuple[int, ...]] = dict(sums)
        for model, *tokens, last in rows:
            before = by_model.get(model, (0, 0, 0, 0))
            by_model[model] = tuple(a + (b or 0) for a, b in zip(before, tokens, strict=True))
            through = max(through, last)
        sums = tuple(by_model.items())
        if len(_summed) >= REMEMBERED:
            _summed.clear()
        _summed[known] = (through, sums)
    total = Usage()
    for model, counts in sums:
        if used := _priced(model, list(counts)):
            total += used
    return total


REMEMBERED = 10_000  # sessions whose sums this process keeps; more and it starts again
# A session (its id and creation time) → the id of the last reply summed, and each model's sums
# of the four token counts.
_summed: dict[tuple[int, datetime], tuple[int, tuple[tuple[str, tuple[int, ...]], ...]]] = {}


SUMS = ("model", "i", "o", "r", "w")


def _by_model(replies: QuerySet[Entry, Any]) -> QuerySet[Entry, Any]:
    return (
        replies.filter(role=Entry.Role.ASSISTANT)
        .values("session_id", "model")
        .annotate(
            i=Sum("input_tokens"),
            o=Sum("output_tokens"),
            r=Sum("cache_read_tokens"),
            w=Sum("cache_write_tokens"),
        )
    )


def _priced(model: str, tokens: list[int | None]) -> Usage | None:
    """A group's sums, priced; None when it used no tokens."""
    used = priced(model, *(count or 0 for count in tokens))
    return used if used.tokens else None


SINCE: Statement[Entry] = Statement(  # a session's replies after one, summed by model
    lambda session_id, after: (
        _by_model(Entry.objects.filter(session_id=session_id, pk__gt=after))
        .annotate(last=Max("id"))
        .values_list(*SUMS, "last")
    ),
    session_id=int,
    after=int,
)


def dollars(cost: Decimal | None) -> str:
    """$0.0123 below a dollar, $12.34 above, <$0.0001 for a trace; empty without a price or for
    a free model (the offline one), where "$0.0000" would say nothing."""
    if not cost:
        return ""
    if cost < Decimal("0.0001"):
        return "<$0.0001"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
