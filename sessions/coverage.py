"""What a handoff document carries: the old session's concrete items, ranked by salience.

The items are those `sessions.items` finds in each entry. One file named as `./x.js`,
`../x.js`, `b/x.js` or under the session's folder is one item.

Each item is ranked by salience, from where and how it was seen: named by the
user, repeated, recent, or part of an error. Matching against a document forgives
casing, separators (`parse_config` ~ `parseConfig` ~ "parse config") and a path
written as its file name; a decision counts as carried when most of its content
words are in the document. Deterministic, no model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import ahocorasick

from . import ledger
from .items import KIND_LABELS, STOPWORDS, normalise
from .salience import Item, ItemsEntry, items_of


def _phrases(kind: str, item: str) -> tuple[str, ...]:
    """The whole-word phrases (normalised, space-padded) whose presence decides an item: the
    item itself, word for word, always (so the way it is judged never depends on where it is
    judged: at the switch, or in the panel); and for some kinds a shorter form."""
    whole = _padded(item)
    if kind == "error":
        return (whole, _padded(item.split(":")[0]))
    if kind == "path":
        name = item.rstrip("/").rsplit("/", 1)[-1]
        return (whole, _padded(name)) if len(normalise(name)) > 3 else (whole,)
    return (whole,)


def _decide(kind: str, item: str, found: set[str], words: frozenset[str]) -> bool:
    if _padded(item) in found:  # written out as it was said
        return True
    if kind == "decision":  # or most of its content words
        content = [w for w in normalise(item).split() if w not in STOPWORDS and len(w) > 2]
        return bool(content) and sum(w in words for w in content) / len(content) >= 0.6
    if kind == "error":  # or its name, with the first words of its message
        rest = [w for w in normalise(item.partition(":")[2]).split() if len(w) > 3][:4]
        return _padded(item.split(":")[0]) in found and all(w in words for w in rest)
    return any(phrase in found for phrase in _phrases(kind, item))


@lru_cache(maxsize=65_536)
def _padded(phrase: str) -> str:
    return f" {normalise(phrase)} "


MAX_CHECKED_CHARS = 2_000_000  # a longer document is checked on its first two million characters


class Document:
    """A handoff document, normalised once, against which many items are checked at once.

    One Aho–Corasick pass finds every phrase the items need, so checking N items costs the
    document's length plus N, not N times the document (an hour, for a hostile 16 MB one).
    """

    def __init__(self, text: str) -> None:
        self.clipped = len(text) > MAX_CHECKED_CHARS
        self.normalised = f" {normalise(text[:MAX_CHECKED_CHARS])} "
        self.words = frozenset(self.normalised.split())

    def mark(self, items: Sequence[Item]) -> None:
        """Set each item's `carried`."""
        found = self._find({phrase for item in items for phrase in _phrases(item.kind, item.text)})
        for item in items:
            item.carried = _decide(item.kind, item.text, found, self.words)

    def _find(self, phrases: set[str]) -> set[str]:
        phrases = {phrase for phrase in phrases if phrase.strip()}
        if not phrases:
            return set()
        automaton = ahocorasick.Automaton()
        for phrase in phrases:
            automaton.add_word(phrase, phrase)
        automaton.make_automaton()
        found: set[str] = set()
        for _, phrase in automaton.iter(self.normalised):
            found.add(phrase)
            if len(found) == len(phrases):
                break
        return found


@dataclass(frozen=True)
class Coverage:
    items: tuple[Item, ...]  # most salient first
    total_entries: int = 0
    clipped: bool = False  # the document was longer than MAX_CHECKED_CHARS

    SHOWN = 2_000  # the panel lists this many items at most (most salient first)

    @property
    def carried(self) -> int:
        return sum(item.carried for item in self.items)

    @property
    def missing(self) -> tuple[Item, ...]:
        return tuple(item for item in self.items if not item.carried)

    @property
    def salient(self) -> tuple[Item, ...]:
        return tuple(item for item in self.items if item.salient)

    @property
    def salient_carried(self) -> int:
        return sum(item.carried for item in self.salient)

    @property
    def score(self) -> int:
        """Salience-weighted share of the items carried, in percent."""
        total = sum(item.weight for item in self.items)
        carried = sum(item.weight for item in self.items if item.carried)
        return round(100 * carried / total) if total else 100

    @property
    def salient_dropped(self) -> list[Item]:
        """The items a handoff must carry that the model's text does not (agentweb may have
        appended some: `appended`)."""
        return [item for item in self.items if item.salient and not item.carried]

    @property
    def salient_appended(self) -> int:
        """Of those, the items agentweb's own sections carry."""
        return sum(item.appended for item in self.salient_dropped)

    def dropped_below_bar(self, limit: int = 20) -> list[Item]:
        """The most salient of the other items the document does not carry."""
        return [item for item in self.items if not item.salient and not item.carried][:limit]

    def summary(self) -> dict[str, int]:
        return {
            "score": self.score,
            "salient": len(self.salient),
            "salient_carried": self.salient_carried,
        }

    @property
    def unlisted(self) -> int:
        """Items too many (and too little salient) to list."""
        return max(0, len(self.items) - self.SHOWN)

    def by_kind(self) -> list[tuple[str, list[Item]]]:
        listed = self.items[: self.SHOWN]
        groups = [
            (label, [i for i in listed if i.kind == kind]) for kind, label in KIND_LABELS.items()
        ]
        return [(label, items) for label, items in groups if items]


def coverage(old_entries: Sequence[ItemsEntry], document: str, cwd: str = "") -> Coverage:
    """The old branch's items (handoff exchanges excluded), each checked against the model's own
    text of the document: what agentweb appended to it (the guard's items, the work ledger) marks
    an item `appended`, never carried."""
    items = items_of(old_entries, cwd)
    own, appended = own_text(document)
    checked = Document(own)
    checked.mark(items)
    if appended:
        rest = [item for item in items if not item.carried]
        Document(appended).mark(rest)
        for item in rest:
            item.appended, item.carried = item.carried, False
    return Coverage(tuple(items), len(old_entries), clipped=checked.clipped)


ADDENDUM_HEADING = "Also carried over"  # the guard's section (sessions.handoff)
APPENDED = re.compile(
    rf"^## (?:{re.escape(ADDENDUM_HEADING)}|{re.escape(ledger.HEADING)})\s*$", re.MULTILINE
)


def own_text(document: str) -> tuple[str, str]:
    """A document's text as the model wrote it, and the sections agentweb appended after it."""
    found = APPENDED.search(document)
    return (
        (document, "") if found is None else (document[: found.start()], document[found.start() :])
    )
