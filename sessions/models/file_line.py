"""A line of an imported session file, kept as the file wrote it, so the export gives the same
file back: the same bytes, in PostgreSQL (whose JSON columns keep their own key order) as in
SQLite."""

from __future__ import annotations

from django.db import models


class FileLine(models.Model):
    session = models.ForeignKey("ChatSession", on_delete=models.CASCADE, related_name="+")
    # The entry the line was imported as; none for the header (line 1).
    entry = models.OneToOneField(
        "Entry", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    text = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["session", "entry"])]

    def __str__(self) -> str:
        return f"line of session {self.session_id}, entry {self.entry_id or 'header'}"
