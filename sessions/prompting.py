"""A prompt as it is stored and sent: what was typed, its prompt template filled in, its
mentions checked, wherever it came from (the message box, a queued prompt, an edit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import attached, attachments, mentions
from .content import block_list, title_from
from .models import ChatSession, Entry, PendingPrompt, PromptTemplate
from .models.prompts import CALL


@dataclass(frozen=True)
class Prompt:
    """Everything the prompt's message is stored with, made once before its claim is taken:
    its words, what it keeps of the sessions it mentions, and the title it gives a session that
    has none (empty when the session has one)."""

    text: str
    data: dict[str, Any]
    title: str
    files: tuple[dict[str, Any], ...] = ()  # the files attached, as the content keeps them

    @property
    def content(self) -> list[dict[str, Any]]:
        words = [{"type": "text", "text": self.text}] if self.text or not self.files else []
        return [*self.files, *words]

    def queue(self, session_id: int) -> None:
        """Wait in the session's queue, the files' ids with it."""
        ids = [block["attachment"] for block in self.files]
        PendingPrompt.objects.create(session_id=session_id, text=self.text, attachments=ids)


def prompt_of(session: ChatSession, typed: str, attached: Sequence[int] = ()) -> Prompt:
    """`typed` as it is stored and sent: its prompt template filled in, within the longest
    message agentweb takes, each session it mentions one of the owner's, wherever the mention
    came from (typed, a template's body, an edit), and each file `attached` one of theirs.
    `Refused` with the reason."""
    text = PromptTemplate.expand(session.owner_id, typed) if CALL.match(typed) else typed
    files = tuple(attachments.chosen(session.owner_id, attached)) if attached else ()
    return Prompt(text, mentions.checked(session, text), _title(session, text, files), files)


def queued_prompt(session: ChatSession, pending: PendingPrompt) -> Prompt:
    """A prompt taken from the queue (made by `prompt_of` when it was typed): a session it
    mentions that was deleted while it waited is left out, not refused; so is a file."""
    text = pending.text
    files = tuple(attachments.chosen(session.owner_id, pending.attachments or [], kept=True))
    return Prompt(text, mentions.data_of(session, text), _title(session, text, files), files)


def _title(session: ChatSession, text: str, files: Sequence[dict[str, Any]]) -> str:
    if session.title:
        return ""
    return title_from(text) or (str(files[0]["name"]) if files else "")


def keeping_files(prompt: Prompt, edited: Entry) -> Prompt:
    """An edit's prompt: the message's new words, with the files the message had."""
    files = tuple(block for block in block_list(edited.content) if attached.is_attached(block))
    return replace(prompt, files=files) if files else prompt
