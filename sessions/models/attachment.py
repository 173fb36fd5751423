"""A file attached to a message: kept on Django's storage ("attachments"), served to its owner
only, and named in the message's content by its id."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Attachment(models.Model):
    """One uploaded file, as agentweb read it: what it is (by its bytes, not its name), its
    size, an image's pixels or a PDF's pages, and the text a search, a handoff and the
    offline model read of it (a text file's text, a PDF's, as far as it could be read)."""

    class Kind(models.TextChoices):
        IMAGE = "image"
        DOCUMENT = "document"  # a PDF
        TEXT = "text"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    session = models.ForeignKey(
        "ChatSession", on_delete=models.CASCADE, related_name="attachments", null=True
    )
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    media_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    path = models.CharField(max_length=300)  # where the "attachments" storage keeps it
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    text = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name
