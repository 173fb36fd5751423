"""What replies cost: tokens and dollars, per reply, per session and per chain of handoffs.

Prices are per million tokens (`AGENTWEB_PRICES`); the prompt cache's reads and writes are
priced apart from plain input, as the API reports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Max, QuerySet, Sum
from django.utils import timezone

from .models import ChatSession, Entry
from .statements import Statement
from .tallies import Tally
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


def of_session(session: ChatSession) -> Usage:
    """One session's total over all its replies, on every branch (each was paid for): every
    status line a prompt shows reads it, and the session list each session's it lists, and
    summing a long session anew each time read every reply it has (4 ms at 10,000 entries on
    SQLite, 8 on PostgreSQL); the process keeps the sums and adds the replies written since
    (`sessions.tallies`: a reply's tokens never change)."""
    return _total(SUMMED.of(session))


Sums = tuple[tuple[str, tuple[int, ...]], ...]  # each model's sums of the four token counts


def _added(sums: Sums, rows: Iterable[tuple[Any, ...]]) -> Sums:
    by_model = dict(sums)
    for model, *tokens, _ in rows:  # a row of no tokens (a user's) adds nothing; a handoff's
        # notes round is a custom entry that used some
        before = by_model.get(model, (0, 0, 0, 0))
        by_model[model] = tuple(a + (b or 0) for a, b in zip(before, tokens, strict=True))
    return tuple(by_model.items())


_SUMMED_TOKENS = {
    "i": Sum("input_tokens"),
    "o": Sum("output_tokens"),
    "r": Sum("cache_read_tokens"),
    "w": Sum("cache_write_tokens"),
}


def _total(sums: Sums) -> Usage:
    """Each model's sums, priced, added up (a model that used no tokens adds nothing)."""
    total = Usage()
    for model, counts in sums:
        used = priced(model, *(count or 0 for count in counts))
        if used.tokens:
            total += used
    return total


def _summed(entries: QuerySet[Entry, Any], *by: str) -> QuerySet[Entry, Any]:
    """`entries`' tokens summed by (`by` and) model, with the last entry of each."""
    return (
        entries.values(*by, "model")
        .annotate(**_SUMMED_TOKENS, last=Max("id"))
        .values_list(*by, "model", "i", "o", "r", "w", "last")
    )


SINCE: Statement[Entry] = Statement(  # a session's entries after one, summed by model
    lambda session_id, after: _summed(Entry.objects.filter(session_id=session_id, pk__gt=after)),
    session_id=int,
    after=int,
)
SUMMED: Tally[tuple[Any, ...], Sums] = Tally(
    SINCE,
    last=lambda row: int(row[-1]),
    fold=_added,
    empty=(),
    many=lambda new: _summed(Entry.objects.filter(new), "session_id"),
)


def of_owner_since(owner_id: int, days: int) -> Usage:
    """What the owner's replies of the last `days` days used, in all their sessions (deleted
    ones included: they were paid for)."""
    since = timezone.now() - timedelta(days=days)
    replies = Entry.objects.filter(session__owner_id=owner_id, created_at__gte=since)
    return _total(_added((), _summed(replies)))


def last_entry_id(session_id: int) -> int:
    """The session's latest entry (0: none yet): what `after` reads from."""
    return Entry.objects.filter(session_id=session_id).aggregate(last=Max("id"))["last"] or 0


def after(session_id: int, entry_id: int) -> Usage:
    """What the session's entries after `entry_id` used: a handoff's rounds (its notes, its
    document, a continuation, an amendment), on every model that wrote them."""
    return _total(_added((), SINCE.rows(session_id=session_id, after=entry_id)))


def dollars(cost: Decimal | None) -> str:
    """$0.0123 below a dollar, $12.34 above, <$0.0001 for a trace; empty without a price or for
    a free model (the offline one), where "$0.0000" would say nothing."""
    if not cost:
        return ""
    if cost < Decimal("0.0001"):
        return "<$0.0001"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
