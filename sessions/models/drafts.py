"""A handoff document written ahead, while its session is idle (issue 55): what `/handoff`
switches with at once when the session has not moved on since."""

from __future__ import annotations

from django.db import models


class HandoffDraft(models.Model):
    """A session's one draft: the leaf it was written at, the focus and model it was written
    for, its document once ready, and the lease of whoever writes it (one writer at a time,
    across processes)."""

    session = models.OneToOneField(
        "ChatSession", on_delete=models.CASCADE, related_name="handoff_draft"
    )
    leaf_id = models.BigIntegerField(null=True)  # the session's leaf when it was begun
    focus = models.TextField(blank=True, default="")
    model = models.CharField(max_length=100, blank=True, default="")  # the model that wrote it
    document = models.TextField(blank=True, default="")  # "": not ready
    writer = models.CharField(max_length=64, blank=True, default="")  # who holds the lease
    writing_until = models.DateTimeField(null=True)  # the lease: no other writer before it
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_tokens = models.PositiveIntegerField(default=0)  # read from the prompt cache
    cache_write_tokens = models.PositiveIntegerField(default=0)
    # What drafts never used cost (replaced by a newer one, or the base of a short update):
    # {model: [input, output, cache read, cache write]}, in the session's usage as the drafts'.
    unused = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Handoff draft of session {self.session_id}"
