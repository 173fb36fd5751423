"""Search over the words of entries, not their JSON: SQLite FTS5 or PostgreSQL full text,
behind one function.

SQLite's index is an FTS5 table with the trigram tokenizer, kept in step with
`chat_entry.search_text` by triggers (migration 0006): it finds any substring of three
characters or more in any script (accents, Chinese, emoji), case-insensitively; shorter
queries fall back to a scan. PostgreSQL matches words with `simple` full text and substrings
(a word inside Chinese text) with ILIKE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .models import ChatSession, Entry

RESULTS = 30
SNIPPET_CONTEXT = 60  # characters shown either side of the match


def searchable(content: Any) -> str:
    """The words of an entry's content: its text and thinking blocks (or the string itself)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict):
            for key in ("text", "thinking"):
                if isinstance(block.get(key), str):
                    parts.append(block[key])
    return "\n".join(parts)


@dataclass(frozen=True)
class Hit:
    entry_id: int
    session: ChatSession
    snippet: SafeString

    @property
    def url(self) -> str:
        return f"{self.session.get_absolute_url()}?at={self.entry_id}#entry-{self.entry_id}"


def matching_entries(owner: User, query: str) -> QuerySet[Entry]:
    """The owner's entries whose words contain `query`, newest first."""
    mine = Entry.objects.filter(session__owner=owner, session__deleted_at__isnull=True)
    if connection.vendor == "sqlite" and len(query) >= 3:
        phrase = '"' + query.replace('"', '""') + '"'
        matches = RawSQL("SELECT rowid FROM chat_entry_fts WHERE chat_entry_fts MATCH %s", [phrase])
        return mine.filter(pk__in=matches).order_by("-pk")
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        words = SearchQuery(query, config="simple", search_type="websearch")
        return (
            mine.annotate(words=SearchVector("search_text", config="simple"))
            .filter(Q(words=words) | Q(search_text__icontains=query))
            .order_by("-pk")
        )
    return mine.filter(search_text__icontains=query).order_by("-pk")


def find(owner: User, query: str, limit: int = RESULTS) -> list[Hit]:
    """The newest entries of the owner's that mention `query`, each with a highlighted snippet."""
    entries = (
        matching_entries(owner, query)
        .select_related("session")
        .only("pk", "search_text", "session")[:limit]
    )
    return [Hit(entry.pk, entry.session, snippet(entry.search_text, query)) for entry in entries]


def snippet(text: str, query: str) -> SafeString:
    """The text around the first place it mentions `query` (any case), the match marked."""
    flat = " ".join(text.split())
    at = flat.lower().find(query.lower())
    if at < 0:  # matched as words apart: show the first of them
        first = query.split()[0] if query.split() else query
        at = flat.lower().find(first.lower())
        query = first if at >= 0 else ""
    at = max(at, 0)
    start, end = max(0, at - SNIPPET_CONTEXT), at + len(query) + SNIPPET_CONTEXT
    before, match, after = flat[start:at], flat[at : at + len(query)], flat[at + len(query) : end]
    return mark_safe(  # noqa: S308 - every part is escaped
        ("…" if start else "")
        + escape(before)
        + (f"<mark>{escape(match)}</mark>" if match else "")
        + escape(after)
        + ("…" if end < len(flat) else "")
    )
