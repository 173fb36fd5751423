"""What each user prefers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Preferences(models.Model):
    """Per-user settings."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agentweb_preferences"
    )
    # With Claude: a short title written by a cheap model call after the first reply.
    generate_titles = models.BooleanField(
        default=False, help_text="With Claude, a short generated title for new sessions."
    )
    # SPEC B14: review and edit the handoff document before the switch.
    review_handoff = models.BooleanField(
        default=False, help_text="Review and edit a handoff document before switching."
    )
    # Hand off by itself before a prompt would take the context past this share of the window.
    auto_handoff_at = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(10), MaxValueValidator(100)],
        help_text="Percent of the model's context window; empty: never.",
    )
    # The model that writes handoff documents and drafts ("": each session's own).
    handoff_writer = models.CharField(max_length=100, blank=True, default="")
    # At that share: compact in place (`/compact`) instead of handing off to a new session.
    auto_compacts = models.BooleanField(default=False)
    # Salient items a handoff document dropped: ask Claude to work them in (one more streamed
    # round) instead of appending them as agentweb's own "Also carried over" section.
    amend_handoff = models.BooleanField(
        default=False,
        help_text="With Claude: one more streamed round works dropped items in.",
    )

    # Standing instructions of the user's own, appended to every handoff request (never instead
    # of its six sections).
    handoff_instructions = models.TextField(
        blank=True,
        default="",
        max_length=4000,
        help_text="Appended to every handoff request, after agentweb's own.",
    )
    # Recall reads the sessions this one came from and those it mentions; with this, every one
    # of the user's own sessions (never another user's).
    recall_everywhere = models.BooleanField(
        default=False, help_text="Recall reads every one of your sessions, not only the lineage."
    )

    # The model may call the `handoff` tool (asking the user first) to start a fresh session.
    propose_handoff = models.BooleanField(
        default=True, help_text="The model may propose a handoff; you allow or deny each."
    )

    # Standing instructions of the user's: the system prompt of every request to the model.
    instructions = models.TextField(
        blank=True,
        default="",
        max_length=8000,
        help_text="Sent as the system prompt of every request, in every session.",
    )
    # Write the handoff document in the background, while the session is idle, once its context
    # passes this share of the window: `/handoff` then switches at once (0: never).
    draft_handoff_at = models.PositiveSmallIntegerField(
        default=60,
        validators=[MaxValueValidator(100)],
        help_text="Percent of the model's context window; 0: never.",
    )

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"Preferences of {self.user}"

    @classmethod
    def of_owner(cls, session: Any, field: str, read_as: str) -> Any:
        """The session owner's `field` (None: they have set no preferences), as the session's
        claim read it into `read_as` when it did (no query then)."""
        if hasattr(session, read_as):
            return getattr(session, read_as)
        return cls.objects.filter(user_id=session.owner_id).values_list(field, flat=True).first()
