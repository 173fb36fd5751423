"""What replies cost: tokens and dollars, per reply, per session and per chain of handoffs.

Prices are per million tokens (`AGENTWEB_PRICES`); the prompt cache's reads and writes are
priced apart from plain input, as the API reports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from django.conf import settings
from django.db.models import Sum

from .models import Entry
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
    rows = (
        Entry.objects.filter(session_id__in=ids, role=Entry.Role.ASSISTANT)
        .values("session_id", "model")
        .annotate(
            i=Sum("input_tokens"),
            o=Sum("output_tokens"),
            r=Sum("cache_read_tokens"),
            w=Sum("cache_write_tokens"),
        )
    )
    for row in rows:
        used = priced(row["model"], row["i"] or 0, row["o"] or 0, row["r"] or 0, row["w"] or 0)
        if used.tokens:
            totals[row["session_id"]] += used
    return totals


def dollars(cost: Decimal | None) -> str:
    """$0.0123 below a dollar, $12.34 above, <$0.0001 for a trace; empty without a price or for
    a free model (the offline one), where "$0.0000" would say nothing."""
    if not cost:
        return ""
    if cost < Decimal("0.0001"):
        return "<$0.0001"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
