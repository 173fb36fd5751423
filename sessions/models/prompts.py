"""Prompts kept for later: one typed while a reply runs (queued), and a user's templates."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models
from django.utils import timezone

CALL = re.compile(r"^/(?P<name>[a-z][a-z0-9_-]*)(?:\s+(?P<args>.*))?$", re.DOTALL)


class PendingPrompt(models.Model):
    """A prompt typed while a generation runs: kept until the session's generation sends it.

    Queued in the database so nothing typed is lost to a reload, another
    process, or a handoff (SPEC B8, B10).
    """

    session = models.ForeignKey(
        "ChatSession", on_delete=models.CASCADE, related_name="pending_prompts"
    )
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text[:50]


class PromptTemplate(models.Model):
    """A user's stored prompt: `/name args` in the chat box expands to `body`."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="prompt_templates"
    )
    name = models.SlugField(max_length=50)
    body = models.TextField(help_text="`$ARGUMENTS` is replaced by the text after the name.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_template_name")
        ]

    def __str__(self) -> str:
        return f"/{self.name}"

    @classmethod
    def expand(cls, owner_id: int, text: str) -> str:
        """`/name args` becomes the owner's template `name`, with `$ARGUMENTS` replaced by args."""
        match = CALL.match(text)
        if not match:
            return text
        template = cls.objects.filter(owner_id=owner_id, name=match["name"]).first()
        if template is None:
            return text
        return template.body.replace("$ARGUMENTS", (match["args"] or "").strip())

    @classmethod
    def names_of(cls, owner_id: int) -> frozenset[str]:
        return frozenset(cls.objects.filter(owner_id=owner_id).values_list("name", flat=True))
