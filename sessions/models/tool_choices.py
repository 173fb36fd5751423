"""What a user chose about the operator's MCP servers and tools (issue 53): a server or a tool
turned off (or on again), for all their sessions or for one; a tool that changes things allowed
always, or asked about each time. The closest choice wins: the session's over the user's, a
tool's over its server's."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import models
from django.db.models import Q

ALWAYS, ASK = "always", "ask"


class ToolChoice(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tool_choices"
    )
    # None: every session of the owner's (Preferences); else this session only
    session = models.ForeignKey(
        "chat.ChatSession", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=200)  # a server's name, or a tool's mcp__<server>__<tool>
    enabled = models.BooleanField(null=True, blank=True)  # None: as the wider choice says
    approval = models.CharField(max_length=8, blank=True, default="")  # always, ask, "": wider

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], condition=Q(session=None), name="chat_choice_user"
            ),
            models.UniqueConstraint(
                fields=["session", "name"], condition=~Q(session=None), name="chat_choice_session"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.enabled}, {self.approval or 'as wider'}"

    @classmethod
    def of(cls, owner_id: int, session_id: int | None = None) -> Choices:
        """The owner's choices, and the session's when one is given: one query."""
        rows = cls.objects.filter(owner_id=owner_id).filter(
            Q(session=None) | Q(session_id=session_id) if session_id else Q(session=None)
        )
        choices = Choices()
        for row in rows.only("session_id", "name", "enabled", "approval"):
            (choices.session if row.session_id else choices.user)[row.name] = row
        return choices

    @classmethod
    def choose(
        cls,
        owner_id: int,
        name: str,
        *,
        session_id: int | None,
        enabled: bool | None,
        approval: str,
    ) -> None:
        """Set one choice (none left: the row goes)."""
        rows = cls.objects.filter(owner_id=owner_id, session_id=session_id, name=name)
        if enabled is None and not approval:
            rows.delete()
        elif not rows.update(enabled=enabled, approval=approval):
            cls.objects.create(
                owner_id=owner_id, session_id=session_id, name=name,
                enabled=enabled, approval=approval,
            )  # fmt: skip


@dataclass
class Choices:
    """A user's choices (and one session's), by name, and what they come to for a tool."""

    user: dict[str, ToolChoice] = field(default_factory=dict)
    session: dict[str, ToolChoice] = field(default_factory=dict)

    def enabled(self, server: str, tool: str) -> bool:
        """Whether the model is offered `tool` (its full name) of `server`."""
        for scope in (self.session, self.user):
            for name in (tool, server):
                row = scope.get(name)
                if row is not None and row.enabled is not None:
                    return row.enabled
        return True

    def always(self, tool: str) -> bool:
        """Whether the user allows every call of `tool` without being asked."""
        for scope in (self.session, self.user):
            row = scope.get(tool)
            if row is not None and row.approval:
                return row.approval == ALWAYS
        return False
