"""`/compact` (issue 55, item 4): the handoff document, written as `/handoff` writes it, becomes
a `compaction` entry of the same session instead of the seed of a new one.

The entry is the reference agent's: its `summary` (the document), `tokensBefore` (the context
it replaced) and `firstKeptEntryId`. agentweb keeps none of the turns above it (the document
already carries the latest ones), so that id is the entry's own, which no earlier entry has:
the context (`context.context_parts`) is the summary, then what follows it, for agentweb and
for the reference agent reading the export alike. The turns above stay in the transcript,
in search, and in recall (`ChatSession.compacted_at` tells recall where they end).
"""

from __future__ import annotations

from django.db import transaction

from . import shapes, status
from .context import COMPACTION_PREFIX, COMPACTION_SUFFIX
from .models import ChatSession, Entry
from .tokens import estimate_tokens


def compact(
    session: ChatSession,
    document: str,
    before: int,
    cost: str | None,
    *,
    automatic_in_a_row: int = 0,
) -> Entry:
    """Append the compaction of `session` to `document`: its context is the document from now
    on. `before`: the context's tokens it replaced; `cost`: all its rounds', in US dollars;
    `automatic_in_a_row`: the automatic handoffs and compactions in a row up to this one,
    without the user's say (0: the user asked for it)."""
    after = estimate_tokens(f"{COMPACTION_PREFIX}{document}{COMPACTION_SUFFIX}")
    details: dict[str, object] = {"tokensAfter": after, "automaticInARow": automatic_in_a_row}
    if cost is not None:
        details["cost"] = cost
    fields = {"summary": document, "tokensBefore": before, "details": details}
    with transaction.atomic():
        entry = session.append(
            kind=Entry.Kind.COMPACTION,
            content=[{"type": "text", "text": document}],
            data={"fields": fields},
        )
        entry.data["refs"] = {"firstKeptEntryId": entry.pk}  # no turn above it is kept
        Entry.objects.filter(pk=entry.pk).update(data=entry.data)
        row = ChatSession.objects.filter(pk=session.pk)
        row.update(context_tokens=after, compacted_at=entry.pk)
    session.context_tokens, session.compacted_at = after, entry.pk
    return entry


def figures(entry: Entry) -> str:
    """A compaction's context before and after, and its document's cost: "186k → 9k tokens,
    $0.41" ("" for one that does not say: an imported one tells only what it replaced)."""
    fields = shapes.part(entry.data, "fields")
    return figures_of(fields.get("tokensBefore"), fields.get("details"))


def figures_of(before: object, details: object) -> str:
    """`figures` from a compaction's `tokensBefore` and `details`, as a query reads them."""
    said = shapes.part(details)
    return status.handoff_figures(
        {
            "context_tokens_before": before,
            "context_tokens_after": said.get("tokensAfter"),
            "cost": said.get("cost"),
        }
    )
