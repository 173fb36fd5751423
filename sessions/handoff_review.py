"""A handoff document under review (B14, issue 56's rough edge 1): with *Review the handoff
document before switching* on, the document waits for the user's Switch or Discard. The wait
is part of the session's state, not of the tab that saw it begin: the document's reply keeps
what the model wrote (`handoff.review`), so a reload or another tab shows the same panel, and
Switch or Discard ends it for every tab."""

from __future__ import annotations

from dataclasses import dataclass

from . import shapes
from .models import ChatSession, Entry
from .providers import catalog


@dataclass(frozen=True)
class Review:
    reply: Entry  # the document's reply, which the new session will come from
    document: str  # as the model wrote it, for the user to edit
    model: str  # the model the new session will run on, which the user may change


def offer(reply: Entry, written: str) -> None:
    """Keep the document waiting for the user on its reply."""
    reply.data = {
        **reply.data,
        "handoff": {**shapes.part(reply.data, "handoff"), "review": written},
    }
    Entry.objects.filter(pk=reply.pk).update(data=reply.data)


def pending(session: ChatSession) -> Review | None:
    """The review the session waits on: its leaf is a handoff document offered for review, no
    session has started from it, and no one discarded it."""
    if session.leaf_id is None:
        return None
    reply = _offered(session.leaf_id)
    if reply is None or ChatSession.objects.filter(handed_off_from=reply).exists():
        return None
    record = shapes.part(reply.data, "handoff")
    written = record.get("review")
    if not isinstance(written, str):
        return None
    model = record.get("model")
    return Review(reply, written, model if isinstance(model, str) and model else session.model)


def discard(session_id: int) -> None:
    """The review ended without a switch: the panel closes for every tab."""
    leaf = ChatSession.objects.filter(pk=session_id).values_list("leaf_id", flat=True).first()
    if leaf is None:
        return
    reply = _offered(leaf)
    if reply is not None:
        record = {k: v for k, v in shapes.part(reply.data, "handoff").items() if k != "review"}
        Entry.objects.filter(pk=reply.pk).update(data={**reply.data, "handoff": record})


def _offered(leaf_id: int) -> Entry | None:
    """The leaf, when it is a handoff document offered for review."""
    return Entry.objects.filter(pk=leaf_id, data__handoff__has_key="review").first()


def models_offered(chosen: str) -> list[tuple[str, str, bool]]:
    """The models the new session may run on, as the panel's choices: id, label, chosen."""
    return [(model.id, model.label, model.id == chosen) for model in catalog.offered()]
