"""A question the agent asks the user before a tool call that changes things (issue 53): which
tool of which server, with which arguments, and the answer. It is part of the generation: every
tab of the session shows it (a reloaded one too, or one on another process) and any of them can
answer it, once."""

from __future__ import annotations

import json

from django.db import models
from django.utils import timezone

ASKED = ""  # not answered yet
ONCE, SESSION, DENY = "once", "session", "deny"  # the user's three buttons
TIMED_OUT, CANCELLED = "timeout", "cancelled"  # denied by the clock, or by Cancel
INTERRUPTED = "interrupted"  # its generation's process died: nobody waits for the answer
ALLOWED = (ONCE, SESSION)


class ToolQuestion(models.Model):
    session = models.ForeignKey(
        "chat.ChatSession", on_delete=models.CASCADE, related_name="tool_questions"
    )
    generation_id = models.CharField(max_length=64)
    call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)  # as the model names it: mcp__<server>__<tool>
    server = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict)
    asked_at = models.DateTimeField(default=timezone.now)
    answer = models.CharField(max_length=16, blank=True, default=ASKED)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["session", "answer"], name="chat_question_open")]

    def __str__(self) -> str:
        return f"{self.tool} in session {self.session_id}: {self.answer or 'asked'}"

    @classmethod
    def open_in(cls, session_id: int, generation_id: str) -> list[ToolQuestion]:
        """The questions of this session's running generation that wait for an answer, oldest
        first (one of a generation that died waits for no one)."""
        if not generation_id:
            return []
        asked = cls.objects.filter(session_id=session_id, generation_id=generation_id)
        return list(asked.filter(answer=ASKED).order_by("pk"))

    @classmethod
    def interrupted(cls, session_id: int | None = None) -> int:
        """The open questions of a generation that died (of session `session_id`, or of every
        session at a single process's start): nobody waits for their answer any more."""
        open_questions = cls.objects.filter(answer=ASKED)
        if session_id is not None:
            open_questions = open_questions.filter(session_id=session_id)
        return open_questions.update(answer=INTERRUPTED, answered_at=timezone.now())

    @classmethod
    def allowed_for_session(cls, session_id: int, tool: str) -> bool:
        """Whether the user chose "Allow for this session" for this tool in this session."""
        return cls.objects.filter(session_id=session_id, tool=tool, answer=SESSION).exists()

    @classmethod
    def answer_once(cls, session_id: int, question_id: int, answer: str) -> bool:
        """Answer an open question of this session: False when it is not one (answered already,
        by another tab or the clock, or not this session's)."""
        n = cls.objects.filter(pk=question_id, session_id=session_id, answer=ASKED).update(
            answer=answer, answered_at=timezone.now()
        )
        return n == 1

    @property
    def arguments_text(self) -> str:
        """The arguments in full, as formatted JSON."""
        return json.dumps(self.arguments, indent=2, ensure_ascii=False, sort_keys=True)

    @property
    def said(self) -> str:
        """The answer in words, as the card says it once answered."""
        return {
            ONCE: "Allowed once",
            SESSION: "Allowed for this session",
            DENY: "Denied",
            TIMED_OUT: "Denied: no answer in time",
            CANCELLED: "Denied: the reply was cancelled",
            INTERRUPTED: "Not run: the reply was interrupted",
        }.get(self.answer, "Waiting for you")
