"""Continue (issue 56): a reply that stopped at the model's maximum length goes on. The job's
first turn is the going on: the model is sent the context as it is, the reply last, as the
start of its own turn, and what it writes is a reply of its own after that one, which the
context and the page join to it."""

from __future__ import annotations

from django.db import transaction

from .. import status
from ..models import ChatSession, Entry
from .caps import over_a_cap
from .claims import claim
from .events import StatusShown
from .turns import Turn

NOT_CONTINUABLE = "Only the latest reply, stopped at its maximum length, can be continued."
BUSY_CONTINUING = "A reply is running in this session: wait for it, or cancel it, to continue."


def begin_going_on(
    session: ChatSession, entry_id: int, generation_id: str, channel: str
) -> str | tuple[ChatSession, Turn]:
    """The session claimed for the reply `entry_id` to go on, and the job's first turn; or
    why not (a refusal)."""
    if refusal := over_a_cap(session, queueing=True):
        return refusal
    with transaction.atomic():  # claimed with the leaf as it is, or not at all
        if not claim(session.pk, generation_id, "prompt", channel):
            return BUSY_CONTINUING
        claimed = ChatSession.objects.get(pk=session.pk)
        reply = Entry.objects.filter(pk=entry_id, session_id=session.pk).first()
        if reply is None or reply.pk != claimed.leaf_id or not reply.stopped_at_length:
            transaction.set_rollback(True)  # the claim is not taken
            return NOT_CONTINUABLE
        return claimed, Turn(go_on=True, status=StatusShown(claimed, status.read(claimed)))
