"""The end of a `/handoff` run: what it keeps on the reply its document comes from (the
coverage before and after, what its rounds cost), and the switch to the new session whose seed
keeps the handoff's figures (H9, H13, B6)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from channels.db import database_sync_to_async

from .. import handoff, status, usage
from ..models import ChatSession, Entry
from ..tokens import estimate_tokens


async def switch(
    session: ChatSession, reply: Entry, document: str, generation_id: str = "", model: str = ""
) -> ChatSession:
    """Start the new session with the document (H9, H13), on `model` ("": as the handoff
    chose), in one transaction (B6); a running generation's claim moves with it."""
    content = handoff.wrap(document, came_from=session)
    record = reply.data.get("handoff", {})
    model = model or (record.get("model") if isinstance(record.get("model"), str) else "")
    in_a_row = (await database_sync_to_async(status.restart)(session)).automatic_in_a_row
    data = {
        "warnings": handoff.check_structure(document).warnings(),
        "fitted": record.get("fitted", []),
        "coverage": record.get("coverage", {}),
        "context_tokens_before": record.get("context_before", session.context_tokens),
        "context_tokens_after": estimate_tokens(content),
        "cost": cost_of(reply),  # the handoff's rounds, in US dollars
        # automatic handoffs in a row up to this one, without the user's say (0: the user's)
        "automatic_in_a_row": in_a_row + 1 if record.get("automatic") else 0,
    }
    return await database_sync_to_async(handoff.new_session)(
        session,
        from_entry=reply,
        content=content,
        data=data,
        generation_id=generation_id,
        model=model,
    )


def record_on(reply: Entry, coverage: dict[str, Any], cost: Decimal | None) -> None:
    """Keep the coverage before and after, and what the run's rounds cost (its notes, document,
    continuation and amendment), on the reply the document comes from."""
    record = {**reply.data.get("handoff", {}), "coverage": coverage}
    if cost is not None:
        record["cost"] = str(cost)
    reply.data = {**reply.data, "handoff": record}
    Entry.objects.filter(pk=reply.pk).update(data=reply.data)


def cost_of(reply: Entry) -> str | None:
    """What the handoff cost, in US dollars, as its run kept it on the reply (the reply's own
    usage for one that does not say)."""
    kept = reply.data.get("handoff", {}).get("cost")
    if isinstance(kept, str):
        return kept
    cost = usage.of_reply(reply).cost
    return None if cost is None else str(cost)
