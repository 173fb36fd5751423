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
from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
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


WORD = re.compile(r"[^\W_]+")  # a word as both databases' tokenizers split them
QUOTED = re.compile(r'"([^"]*)"?')  # a phrase in quotes (its closing quote may be missing)
MOST_TERMS = 12  # words and phrases a query matches with; the rest of it is left out


@dataclass(frozen=True)
class Terms:
    """What a query asks for: words, each found as a word or the start of one, in any order,
    and phrases, words that must stand together in their order (quoted, or joined by signs, as
    in `e2e-tests`). `rest`: the query without its quotes, also found as written inside words
    (text in a script without spaces, such as Chinese; signs)."""

    words: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    rest: str

    def fts5(self) -> str:
        """The terms as an FTS5 query that needs all of them."""
        quote = '"{}"'.format
        terms = [quote(w.replace('"', '""')) + "*" for w in self.words]
        terms += [quote(" ".join(p).replace('"', '""')) for p in self.phrases]
        return " ".join(terms)

    def tsquery(self) -> str:
        """The terms as PostgreSQL's tsquery (over folded words) that needs all of them."""
        terms = [f"'{w}':*" for w in self.folded_words]
        terms += ["(" + " <-> ".join(f"'{w}'" for w in p) + ")" for p in self.folded_phrases]
        return " & ".join(terms)

    @property
    def folded_words(self) -> list[str]:
        return [folded(w) for w in self.words if _lexeme(folded(w))]

    @property
    def folded_phrases(self) -> list[list[str]]:
        phrases = [[folded(w) for w in p] for p in self.phrases]
        return [p for p in phrases if all(_lexeme(w) for w in p)]

    def __bool__(self) -> bool:
        return bool(self.words or self.phrases)


def _lexeme(word: str) -> bool:
    """Whether a folded word can stand in a tsquery as written (a word character run)."""
    return bool(word) and WORD.fullmatch(word) is not None


def terms_of(query: str) -> Terms:
    """`query`'s words and phrases (`Terms`), at most MOST_TERMS of them."""
    words: list[str] = []
    phrases: list[tuple[str, ...]] = []
    for quoted in QUOTED.findall(query):
        _add(WORD.findall(quoted), words, phrases)
    for token in QUOTED.sub(" ", query).split():
        _add(WORD.findall(token), words, phrases)
    words = list(dict.fromkeys(words))
    kept = words[:MOST_TERMS], tuple(dict.fromkeys(phrases))[: max(0, MOST_TERMS - len(words))]
    return Terms(tuple(kept[0]), kept[1], " ".join(query.replace('"', " ").split()))


def _add(parts: list[str], words: list[str], phrases: list[tuple[str, ...]]) -> None:
    if len(parts) == 1:
        words.append(parts[0])
    elif parts:
        phrases.append(tuple(parts))


def holds(text: str, term: str) -> bool:
    """Whether `text` (folded) holds `term`, a word or a phrase's words with a space between,
    as `holding` finds it: the word inside a word too (as written, for scripts without spaces),
    the phrase's words together."""
    parts = [folded(part) for part in term.split(" ")]
    if len(parts) == 1:
        return parts[0] in text
    return re.search(r"[\W_]+".join(map(re.escape, parts)), text) is not None


def matching_entries(owner: User, query: str) -> QuerySet[Entry]:
    """The owner's entries that hold every word and phrase of `query`, in any order and
    whatever their case and accents (or hold it as written, inside words), newest first."""
    return _matching(owner, terms_of(query)).order_by("-pk")


def _matching(owner: User, terms: Terms) -> QuerySet[Entry]:
    """The owner's entries (of kept sessions built whole) that hold `terms`."""
    mine = Entry.objects.filter(
        session__owner=owner, session__deleted_at__isnull=True, session__building=False
    )
    return with_words(mine).filter(holding(terms))


def holding(terms: Terms) -> Q:
    """Entries holding every one of the terms, or `terms.rest` as written inside their words."""
    if connection.vendor == "postgresql":
        tsquery = terms.tsquery()
        found = Q(bare__icontains=folded(terms.rest)) if terms.rest else Q(pk__in=[])
        if tsquery:
            found |= Q(words=SearchQuery(tsquery, config="simple", search_type="raw"))
        return found
    if connection.vendor != "sqlite":
        return Q(search_text__icontains=terms.rest)
    found = Q(pk__in=[])
    if terms:
        found |= Q(pk__in=RawSQL(_WORDS, [terms.fts5()]))
    if len(terms.rest) >= 3:
        found |= Q(pk__in=RawSQL(_TRIGRAMS, ['"' + terms.rest.replace('"', '""') + '"']))
    elif terms.rest:
        found |= Q(search_text__icontains=terms.rest)
    return found


def with_words(entries: QuerySet[Entry]) -> QuerySet[Entry]:
    """`entries` with what `holding` compares on PostgreSQL: the unaccented text and its words."""
    if connection.vendor != "postgresql":
        return entries
    unaccented = without_accents("search_text")
    return entries.alias(words=SearchVector(unaccented, config="simple"), bare=unaccented)


def ranked(owner: User, entries: QuerySet[Entry], terms: Terms, limit: int) -> list[int]:
    """The ids of the best `limit` of `entries` (the owner's matches of `holding(terms)`): the
    most relevant first (FTS5's bm25 on SQLite, `ts_rank` on PostgreSQL), then the newest by
    when each was said. A match of the text as written alone (inside words) comes after the
    words' matches.

    PostgreSQL ranks the newest CANDIDATES matches: `ts_rank` parses each entry's text again,
    and a common word holds thousands. SQLite takes bm25 from one pass of its words index."""
    newest = entries.order_by("-created_at", "-pk")
    if connection.vendor == "postgresql" and terms:
        query = SearchQuery(terms.tsquery(), config="simple", search_type="raw")
        rank = SearchRank(SearchVector(without_accents("search_text"), config="simple"), query)
        candidates = newest.values("pk")[:CANDIDATES]
        best = Entry.objects.filter(pk__in=candidates).annotate(rank=rank)
        return list(
            best.order_by("-rank", "-created_at", "-pk").values_list("pk", flat=True)[:limit]
        )
    if connection.vendor != "sqlite" or not terms:
        return list(newest.values_list("pk", flat=True)[:limit])
    with connection.cursor() as cursor:  # plain SQL: bm25 needs the words index's own query
        cursor.execute(_BM25, [terms.fts5(), owner.pk, limit])
        words = [row[0] for row in cursor.fetchall()]
    if len(words) == limit:
        return words
    written = newest.exclude(pk__in=words).values_list("pk", flat=True)[: limit - len(words)]
    return words + list(written)


CANDIDATES = 500  # the newest matches PostgreSQL ranks
_TRIGRAMS = "SELECT rowid FROM chat_entry_fts WHERE chat_entry_fts MATCH %s"
_WORDS = "SELECT rowid FROM chat_entry_words WHERE chat_entry_words MATCH %s"
_BM25 = (  # the owner's entries the words index matches, best first (`mine` in `find`)
    "SELECT w.rowid FROM chat_entry_words AS w "
    "JOIN chat_entry AS e ON e.id = w.rowid JOIN chat_chatsession AS s ON s.id = e.session_id "
    "WHERE chat_entry_words MATCH %s AND s.owner_id = %s AND s.deleted_at IS NULL "
    "AND NOT s.building ORDER BY bm25(chat_entry_words), e.created_at DESC, e.id DESC LIMIT %s"
)


def find(owner: User, query: str, limit: int = RESULTS) -> list[Hit]:
    """The owner's entries that hold every word of `query`, the most relevant first, then the
    newest by when each was said (an imported session's entries by their own dates), each with
    a highlighted snippet."""
    terms = terms_of(query)
    ids = ranked(owner, _matching(owner, terms), terms, limit)
    found = Entry.objects.select_related("session").only("pk", "search_text", "session")
    by_id = found.in_bulk(ids)
    return [Hit(pk, by_id[pk].session, snippet(by_id[pk].search_text, query)) for pk in ids]


def snippet(text: str, query: str, around: str = "") -> Snippet:
    """The text around the first place it mentions `query` (any case); matched as words apart,
    around `around` (else the query's first word)."""
    flat = " ".join(text.split())
    at, upto = find_folded(flat, query)
    if at < 0 and (around or query.split()):  # matched as words apart: show one of them
        at, upto = find_folded(flat, around or query.split()[0])
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
