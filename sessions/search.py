"""Search over the words of entries, not their JSON: SQLite FTS5 or PostgreSQL full text,
behind one function.

SQLite has two FTS5 tables kept in step with `chat_entry.search_text` by triggers: a trigram
index (migration 0006) finds any substring of three characters or more in any script (Chinese,
emoji) as it is written, case-insensitively; a `unicode61 remove_diacritics 2` index (0017)
finds words and the starts of words whatever their accents ("resume" finds "résumé"). Shorter
queries also scan. PostgreSQL matches words with `simple` full text over the `unaccent`ed text
and substrings (a word inside Chinese text) with ILIKE over it, so accents never matter.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F, Func, Q, QuerySet
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


def folded(text: str) -> str:
    """The text as search compares it: without accents, in case-folded form."""
    return "".join(_fold(char) for char in text)


def _fold(char: str) -> str:
    bare = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    return bare.casefold()


def fold_sql(text: str | None) -> str | None:
    """`folded` as SQLite's `agentweb_fold` function (registered on each connection)."""
    return None if text is None else folded(text)


def without_accents(field: str) -> Func:
    """The column `field` as search compares it, in SQL: unaccented on PostgreSQL, folded on
    SQLite (`agentweb_fold`); compare it with `folded(query)`, case-insensitively."""
    function = "agentweb_unaccent" if connection.vendor == "postgresql" else "agentweb_fold"
    return Func(F(field), function=function)


def find_folded(text: str, query: str) -> tuple[int, int]:
    """Where `query` first occurs in `text` ignoring case and accents: (start, end) in `text`,
    or (-1, -1)."""
    plain, starts = [], []
    for at, char in enumerate(text):
        for part in _fold(char):
            plain.append(part)
            starts.append(at)
    wanted = folded(query)
    found = "".join(plain).find(wanted) if wanted else -1
    if found < 0:
        return -1, -1
    last = starts[found + len(wanted) - 1]
    return starts[found], last + 1


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
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchQuery, SearchVector

        unaccented = without_accents("search_text")
        words = SearchQuery(folded(query), config="simple", search_type="websearch")
        return (
            mine.annotate(words=SearchVector(unaccented, config="simple"), bare=unaccented)
            .filter(Q(words=words) | Q(bare__icontains=folded(query)))
            .order_by("-pk")
        )
    if connection.vendor != "sqlite":
        return mine.filter(search_text__icontains=query).order_by("-pk")
    phrase = '"' + query.replace('"', '""') + '"'
    found = Q(pk__in=RawSQL(_WORDS, [phrase + "*"])) if _has_words(query) else Q(pk__in=[])
    if len(query) >= 3:
        found |= Q(pk__in=RawSQL(_TRIGRAMS, [phrase]))
    else:
        found |= Q(search_text__icontains=query)
    return mine.filter(found).order_by("-pk")


_TRIGRAMS = "SELECT rowid FROM chat_entry_fts WHERE chat_entry_fts MATCH %s"
_WORDS = "SELECT rowid FROM chat_entry_words WHERE chat_entry_words MATCH %s"


def _has_words(query: str) -> bool:
    """Whether the words index has anything to match in `query`: a letter or a digit (FTS5's
    unicode61 tokenizer makes no token of the rest, and a phrase of none is an error)."""
    return any(char.isalnum() for char in query)


def find(owner: User, query: str, limit: int = RESULTS) -> list[Hit]:
    """The newest entries of the owner's that mention `query`, each with a highlighted snippet.

    Newest by when each was said (an imported session's entries by their own dates): an order
    no index gives, so PostgreSQL takes the matches from the words and substrings indexes. In
    id order it walked every user's entries from the newest until it had `limit` of them, the
    whole table when the words are rare (180 ms behind 134,000 entries, 1-2 ms now)."""
    entries = (
        matching_entries(owner, query)
        .order_by("-created_at", "-pk")
        .select_related("session")
        .only("pk", "search_text", "session")[:limit]
    )
    return [Hit(entry.pk, entry.session, snippet(entry.search_text, query)) for entry in entries]


def snippet(text: str, query: str) -> Snippet:
    """The text around the first place it mentions `query` (any case)."""
    flat = " ".join(text.split())
    at, upto = find_folded(flat, query)
    if at < 0 and query.split():  # matched as words apart: show the first of them
        at, upto = find_folded(flat, query.split()[0])
    if at < 0:
        at = upto = 0
    start, end = max(0, at - SNIPPET_CONTEXT), upto + SNIPPET_CONTEXT
    return Snippet(
        flat[start:at],
        flat[at:upto],
        flat[upto:end],
        cut_before=start > 0,
        cut_after=end < len(flat),
    )
