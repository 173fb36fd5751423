"""A prompt as it is stored and sent: what was typed, its prompt template filled in, its
mentions checked, wherever it came from (the message box, a queued prompt, an edit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import mentions
from .content import title_from
from .models import ChatSession, PromptTemplate
from .models.prompts import CALL


@dataclass(frozen=True)
class Prompt:
    """Everything the prompt's message is stored with, made once before its claim is taken:
    its words, what it keeps of the sessions it mentions, and the title it gives a session that
    has none (empty when the session has one)."""

    text: str
    data: dict[str, Any]
    title: str

    @property
    def content(self) -> list[dict[str, Any]]:
        return [{"type": "text", "text": self.text}]


def prompt_of(session: ChatSession, typed: str) -> Prompt:
    """`typed` as it is stored and sent: its prompt template filled in, within the longest
    message agentweb takes, and each session it mentions one of the owner's, wherever the
    mention came from (typed, a template's body, an edit). `Refused` with the reason."""
    text = PromptTemplate.expand(session.owner_id, typed) if CALL.match(typed) else typed
    return Prompt(text, mentions.checked(session, text), _title(session, text))


def queued_prompt(session: ChatSession, text: str) -> Prompt:
    """A prompt taken from the queue (made by `prompt_of` when it was typed): a session it
    mentions that was deleted while it waited is left out, not refused."""
    return Prompt(text, mentions.data_of(session, text), _title(session, text))


def _title(session: ChatSession, text: str) -> str:
    return "" if session.title else title_from(text)
