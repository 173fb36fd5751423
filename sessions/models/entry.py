"""An entry of a session's tree: a message, a note, a marker of the reference agent's kinds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..content import Kind, Role, Status, searchable, text_of
from ..context import entry_parts, in_context
from ..items import entry_items
from ..shapes import part, texts

IN_ORDER_BATCH = 10_000  # ids a query of `Entry.in_order`


class Entry(models.Model):
    Kind = Kind
    Role = Role
    Status = Status

    # Found through the index of (session, id) below: an index of the session alone was one more
    # to write at every append, and tempted the planner to read a long session's every entry.
    session = models.ForeignKey(
        "ChatSession", on_delete=models.CASCADE, related_name="entries", db_index=False
    )
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

    # Set by the page (transcript.fold): the tool results it shows folded under this reply's
    # calls, by call id.
    folded_results: dict[str, Entry] | None = None
    # Set by the page: where it stands among its parent's children (a tree.Siblings), if any.
    siblings: Any = None
    # Set by the page (transcript.join): a reply's later tool round, shown in its first card.
    reply_start: int | None = None
    goes_on = False  # and the round before it: its reply's card goes on below it

    class Meta:
        verbose_name_plural = "entries"
        indexes = [
            models.Index(fields=["session", "id"]),
            # A session's roots (its first entry; an import's child listed before its parent):
            # the status line reads a handed-off session's seed at every turn, and without it
            # PostgreSQL walked every user's entries in id order to find it.
            models.Index(
                fields=["session", "id"], condition=Q(parent__isnull=True), name="chat_entry_roots"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.role or self.custom_type} #{self.pk}"

    @property
    def text(self) -> str:
        """The entry's text blocks joined by newlines; other blocks are not text."""
        return text_of(self.content)

    @property
    def warnings(self) -> list[str]:
        """A handoff document's structure warnings (none, when a file gave something else)."""
        return texts(self.data.get("warnings"))

    @property
    def fitted(self) -> list[str]:
        """How a handoff was fitted to the model's window, line by line: a seed's own, or the
        handoff reply's."""
        return texts(self.data.get("fitted")) or texts(part(self.data, "handoff").get("fitted"))

    @property
    def purpose(self) -> Any:
        """What a prompt or reply was for ("handoff", "handoff_notes"), as stored; None for the
        conversation's own. The templates read this, not `data.purpose`: a key the dict lacks
        cost the template engine an exception and a `dir()` of the dict at every entry shown."""
        return part(self.data).get("purpose")

    @property
    def stopped_at_length(self) -> bool:
        """A complete reply the model ended at its maximum length: Continue goes on with it."""
        reply = self.kind == self.Kind.MESSAGE and self.role == self.Role.ASSISTANT
        stop = part(self.data, "message").get("stopReason")
        return reply and self.status == self.Status.COMPLETE and stop == "length"

    @property
    def is_handoff(self) -> bool:
        return self.kind == self.Kind.CUSTOM_MESSAGE and self.custom_type == "handoff"

    @classmethod
    def in_order(cls, ids: Sequence[int]) -> list[Entry]:
        """These entries, in this order: a query for each IN_ORDER_BATCH of them (a statement
        holds at most 65,535 parameters on PostgreSQL, and a branch up to 100,000 entries)."""
        found: dict[int, Entry] = {}
        for start in range(0, len(ids), IN_ORDER_BATCH):
            found.update(cls.objects.in_bulk(ids[start : start + IN_ORDER_BATCH]))
        return [found[entry_id] for entry_id in ids if entry_id in found]

    def copy_to(self, session_id: int) -> Entry:
        """A copy of this entry for another session (unsaved; its parent is the caller's)."""
        fields = {
            field.attname: getattr(self, field.attname)
            for field in Entry._meta.concrete_fields
            if field.attname not in ("id", "session_id", "parent_id")
        }
        return Entry(session_id=session_id, **fields)

    def derive(self) -> Entry:
        """Fill the fields read from its content once, before it is first saved: the items it
        mentions and the words it is found by."""
        self.items = entry_items(self)
        self.search_text = searchable(self.content)
        return self

    @property
    def context_added(self) -> int:
        """The tokens it adds to the model's context (the reference agent's estimate)."""
        return sum(part.tokens for part in entry_parts(self))

    @property
    def reported_context(self) -> int:
        """The context size its usage reports (a reply's), or 0. The API's input_tokens leave
        out what it read from or wrote to its prompt cache; a reply left out of the context (a
        handoff's, a cancelled one) and a handoff that sent a fitted request report the size
        of their own request, not of the session's context."""
        if not self.input_tokens or self.data.get("fitted") or not in_context(self):
            return 0
        cached = self.cache_read_tokens + self.cache_write_tokens
        return self.input_tokens + cached + self.output_tokens
