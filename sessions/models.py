"""The session tree of the reference agent, stored in the database.

A ChatSession owns Entries that form a tree (each entry points at its parent);
`leaf` marks the end of the current branch. Lineage (`parent_session`,
`handed_off_from`) records where a handed-off session came from.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone


class ChatSession(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    leaf = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    parent_session = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    handed_off_from = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # A fork (the reference agent's /branch): the entry of another session it was copied up to.
    forked_from = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The first session of this session's chain of handoffs (empty: this one is the first).
    chain_root = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Which part of its chain this session is: 1 for a first session, its parent's plus one for
    # one handed off (set when it is created, so showing it costs no query).
    part = models.PositiveIntegerField(default=1)
    # The size of the context, as the reference agent estimates it: the last reply's
    # reported usage plus an estimate of what came after it (kept up to date by the store).
    context_tokens = models.PositiveIntegerField(default=0)
    # An imported session: the model its file ran on ("provider/model"), and its working folder.
    imported_model = models.CharField(max_length=200, blank=True)
    cwd = models.CharField(max_length=500, blank=True)

    # How much Claude thinks before replying (sessions.thinking): the latest
    # thinking_level_change on the branch.
    thinking_level = models.CharField(max_length=16, default="off")
    # Session care: pinned to the top of the list; archived (out of the list, still found by
    # search); deleted (out of sight, restorable until AGENTWEB_UNDO_DELETE_SECONDS pass).
    pinned = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    # The reply streaming now, saved every few seconds: what a crash would otherwise lose.
    partial_text = models.TextField(blank=True)
    partial_purpose = models.CharField(max_length=32, blank=True)
    partial_model = models.CharField(max_length=100, blank=True)

    # The claim of the one generation allowed per session (SPEC B8, B12).
    generation_id = models.CharField(max_length=40, blank=True)
    generation_kind = models.CharField(max_length=16, blank=True)
    generation_channel = models.CharField(max_length=200, blank=True)
    generation_started_at = models.DateTimeField(null=True, blank=True)
    generation_lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"]),
            models.Index(fields=["owner", "chain_root"]),
        ]
        constraints = [
            # One handoff document starts at most one session, however many tabs confirm it.
            models.UniqueConstraint(
                fields=["handed_off_from"],
                condition=Q(handed_off_from__isnull=False),
                name="one_session_per_handoff_document",
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Session {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("chat:session", args=[self.pk])

    @property
    def chain_id(self) -> int:
        return self.chain_root_id or self.pk

    @property
    def display_title(self) -> str:
        return self.title or "Untitled session"

    @property
    def is_generating(self) -> bool:
        """A live claim: some process is generating and renewing its lease."""
        return (
            bool(self.generation_id)
            and self.generation_lease_until is not None
            and (self.generation_lease_until > timezone.now())
        )

    @property
    def was_interrupted(self) -> bool:
        """A claim whose process stopped renewing it: that generation died with its process."""
        return bool(self.generation_id) and not self.is_generating

    @staticmethod
    def kept() -> Q:
        """Not deleted: the sessions a person sees, opens and finds."""
        return Q(deleted_at__isnull=True)

    @staticmethod
    def claimable() -> Q:
        return Q(generation_id="") | Q(generation_lease_until__lt=timezone.now())

    @staticmethod
    def lease_until() -> Any:
        return timezone.now() + timedelta(seconds=settings.AGENTWEB_GENERATION_LEASE)


class Entry(models.Model):
    class Kind(models.TextChoices):
        MESSAGE = "message"
        CUSTOM_MESSAGE = "custom_message"
        MODEL_CHANGE = "model_change"
        THINKING_LEVEL_CHANGE = "thinking_level_change"
        COMPACTION = "compaction"
        BRANCH_SUMMARY = "branch_summary"
        LABEL = "label"
        CUSTOM = "custom"

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL_RESULT = "toolResult"

    class Status(models.TextChoices):
        COMPLETE = "complete"
        ABORTED = "aborted"
        FAILED = "failed"

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="entries")
    parent = models.ForeignKey(
        "self", on_delete=models.DO_NOTHING, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=40, choices=Kind.choices, default=Kind.MESSAGE)
    role = models.CharField(max_length=40, blank=True)
    # A list of typed blocks, e.g. [{"type": "text", "text": "..."}].
    content = models.JSONField(default=list, blank=True)
    custom_type = models.CharField(max_length=100, blank=True)
    display = models.BooleanField(default=True)
    # Anything else a kind carries (warnings of a handoff, fields of imported kinds).
    data = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(blank=True)
    model = models.CharField(max_length=100, blank=True)
    # The concrete items it mentions, [kind, text, source, error]: extracted once when written
    # (an entry never changes), so coverage of a long session need not scan its text again.
    items = models.JSONField(null=True, blank=True, editable=False)
    # The words of the entry a person searches for (text and thinking, never the JSON around
    # them): indexed by SQLite FTS5 or PostgreSQL full text (`sessions.search`).
    search_text = models.TextField(default="", blank=True, editable=False)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # Input tokens the API read from its prompt cache, and wrote to it (priced apart).
    cache_read_tokens = models.PositiveIntegerField(default=0)
    cache_write_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    # Set by transcript.fold: the tool results the page shows folded under this reply's calls.
    folded_results: dict[str, Entry] | None = None
    # Set by the page: where it stands among its parent's children (a store.Siblings), if any.
    siblings: Any = None

    class Meta:
        verbose_name_plural = "entries"
        indexes = [models.Index(fields=["session", "id"])]

    def __str__(self) -> str:
        return f"{self.kind}/{self.role or self.custom_type} #{self.pk}"

    @property
    def text(self) -> str:
        """The entry's text blocks joined by newlines; other blocks are not text."""
        return text_of(self.content)

    @property
    def shown_blocks(self) -> list[dict[str, Any]]:
        """The content as the page shows it (tool work and thinking folded)."""
        from .transcript import blocks

        return blocks(self)

    @property
    def is_handoff(self) -> bool:
        return self.kind == self.Kind.CUSTOM_MESSAGE and self.custom_type == "handoff"


def text_of(content: Any) -> str:
    """Join the `text` blocks of a content value (a string or a list of blocks) with `\\n`."""
    if isinstance(content, str):
        return content
    return "\n".join(
        block.get("text", "")
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


class PendingPrompt(models.Model):
    """A prompt typed while a generation runs: kept until the session's generation sends it.

    Queued in the database so nothing typed is lost to a reload, another
    process, or a handoff (SPEC B8, B10).
    """

    session = models.ForeignKey(
        ChatSession, on_delete=models.CASCADE, related_name="pending_prompts"
    )
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text[:50]


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
    # Salient items a handoff document dropped: ask Claude to work them in (one more streamed
    # round) instead of appending them as agentweb's own "Also carried over" section.
    amend_handoff = models.BooleanField(
        default=False,
        help_text="With Claude: one more streamed round works dropped items in.",
    )

    class Meta:
        verbose_name_plural = "preferences"

    def __str__(self) -> str:
        return f"Preferences of {self.user}"


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
