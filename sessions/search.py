"""Search over the words of entries, not their JSON: SQLite FTS5 or PostgreSQL full text,
behind one function.

SQLite's index is an FTS5 table with the trigram tokenizer, kept in step with
`chat_entry.search_text` by triggers (migration 0006): it finds any substring of three
characters or more in any script (accents, Chinese, emoji), case-insensitively; shorter
queries fall back to a scan. PostgreSQL matches words with `simple` full text and substrings
(a word inside Chinese text) with ILIKE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from .models import ChatSession, Entry

RESULTS = 30
SNIPPET_CONTEXT = 60  # characters shown either side of the match
QUERY_CHARS = 200
# NUL ends an FTS5 phrase and PostgreSQL refuses it in text; other control characters and
# half surrogate pairs are in no entry's words either.
UNSEARCHABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def query_of(typed: str) -> str:
    """What is searched for when a person types `typed`: it, without the characters no database
    can match, at most QUERY_CHARS long."""
    return UNSEARCHABLE.sub("", typed).strip()[:QUERY_CHARS]


@dataclass(frozen=True)
class Snippet:
    """The words around a match: before it, the match, after it, and whether the text goes on
    before and after what is shown."""

    before: str
    match: str
    after: str
    cut_before: bool = False
    cut_after: bool = False

    @property
    def plain(self) -> str:
        """The words as plain text, with … where the text goes on."""
        more_before, more_after = "…" if self.cut_before else "", "…" if self.cut_after else ""
        return f"{more_before}{self.before}{self.match}{self.after}{more_after}"


@dataclass(frozen=True)
class Hit:
    entry_id: int
    session: ChatSession
    snippet: Snippet

    @property
    def url(self) -> str:
        return self.session.url_at(self.entry_id)


def matching_entries(owner: User, query: str) -> QuerySet[Entry]:
    """The owner's entries whose words contain `query`, newest first."""
    mine = Entry.objects.filter(
        session__owner=owner, session__deleted_at__isnull=True, session__building=False
    )
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


def snippet(text: str, query: str) -> Snippet:
    """The text around the first place it mentions `query` (any case)."""
    flat = " ".join(text.split())
    at = flat.lower().find(query.lower())
    if at < 0:  # matched as words apart: show the first of them
        first = query.split()[0] if query.split() else query
        at = flat.lower().find(first.lower())
        query = first if at >= 0 else ""
    at = max(at, 0)
    start, end = max(0, at - SNIPPET_CONTEXT), at + len(query) + SNIPPET_CONTEXT
    return Snippet(
        flat[start:at],
        flat[at : at + len(query)],
        flat[at + len(query) : end],
        cut_before=start > 0,
        cut_after=end < len(flat),
    )
