"""A prompt as it is stored and sent: what was typed, its prompt template filled in, its
mentions checked, wherever it came from (the message box, a queued prompt, an edit)."""

from __future__ import annotations

from . import mentions
from .models import ChatSession, PromptTemplate, Refused
from .models.prompts import CALL


def as_sent(session: ChatSession, text: str) -> str:
    """`text` as it is stored and sent: its prompt template filled in, within the longest
    message agentweb takes, and each session it mentions one of the owner's, wherever the
    mention came from (typed, a template's body, an edit). `Refused` with the reason."""
    if CALL.match(text):
        text = PromptTemplate.expand(session.owner_id, text)
    if refusal := mentions.refusal(session, text):
        raise Refused(refusal)
    return text
