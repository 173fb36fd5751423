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

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

import ahocorasick

from .content import EntryLike
from .context import first_kept, in_context, latest_compaction
from .items import (
    KIND_LABELS,
    KIND_NAMES,
    STOPWORDS,
    Piece,
    concrete,
    entry_items,
    entry_pieces,
    normalise,
)


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


@lru_cache(maxsize=65_536)
def path_key(path: str, cwd: str = "") -> str:
    """One key for one file: without `./`, `../`, a diff's `a/`/`b/`, the session's folder or a
    line number."""
    path = re.sub(r"(?::\d+)+$", "", path)
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        path = path[len(cwd.rstrip("/")) + 1 :]
    while path.startswith(("./", "../")):
        path = path.split("/", 1)[1]
    if re.match(r"^[ab]/[^/]+/", path):
        path = path[2:]
    return path.lower()


# --- where items were seen ---------------------------------------------------------------------
# How much one mention says about an item, by where it was seen.
SOURCE_WEIGHTS = {
    "user": 3.0,  # the person named it
    "custom": 2.5,  # an earlier handoff's document, or a message injected for the model
    "summary": 2.5,  # a compaction's or a branch's summary: already chosen as what matters
    "assistant": 1.5,
    "bash_command": 1.5,
    "tool_call": 1.0,  # the files and commands the agent acted on
    "thinking": 0.5,
    "tool_result": 0.5,  # tool output is mostly noise, unless it is the latest error
}
# Where a mention means the conversation was about the item (repetition counts only there).
DISCUSSED = frozenset({"user", "custom", "summary", "assistant"})
SOURCE_LABELS = {
    "user": "a user message",
    "custom": "an injected message",
    "summary": "a compaction summary",
    "assistant": "an assistant reply",
    "tool_call": "a tool call",
    "bash_command": "a bash command",
    "thinking": "the assistant's thinking",
    "tool_result": "a tool result",
}
KIND_WEIGHTS = {"decision": 1.5, "url": 0.5, "error": 1.0}
SALIENT = 4.5  # from this salience on, an item is one a handoff must carry
WEIGHT_FROM = 3.0  # below this salience an item does not count in the score


class ItemsEntry(EntryLike, Protocol):
    """An entry with the items extracted when it was written (a model Entry, or a store row)."""

    @property
    def items(self) -> list[list[Any]] | None: ...


def _is_read(entry: EntryLike) -> bool:
    """What a handoff must carry is what the conversation held: not the entries left out of its
    context (the handoff exchanges, replies cancelled or failed), nor a handoff's notes."""
    return in_context(entry) and entry.custom_type != "handoff_notes"


def context_start(entries: Sequence[EntryLike]) -> int:
    """Where the model's context begins on the branch: the latest compaction's first kept entry
    (its summary stands for everything before), or the start."""
    at = latest_compaction(entries)
    return 0 if at is None else first_kept(entries, at)


# --- items, ranked -----------------------------------------------------------------------------
@dataclass
class Item:
    kind: str
    text: str  # as first written
    salience: float = 0.0
    carried: bool = False
    mentions: int = 0  # entries that mention it
    discussed: int = 0  # of those, user and assistant messages and summaries
    sources: set[str] = field(default_factory=set)
    last_position: int = 0
    last_source: str = ""
    in_error: bool = False
    in_context: bool = False  # mentioned since the latest compaction (or in its summary)
    reasons: tuple[str, ...] = ()
    last_where: EntryLike | str | None = field(default=None, repr=False)  # its last entry, or text

    @property
    def snippet(self) -> str:
        """The line it was last seen in."""
        where = self.last_where
        if where is not None and not isinstance(where, str):
            where = "\n".join(piece.text for piece in entry_pieces(where))
        return _line_around(where or "", self.text)

    @property
    def salient(self) -> bool:
        return self.salience >= SALIENT

    @property
    def weight(self) -> float:
        """How much the item counts in the coverage score: (salience - 3)², so the few items that
        matter outweigh the many that do not, and items seen only in passing count for nothing."""
        return max(0.0, self.salience - WEIGHT_FROM) ** 2

    @property
    def kind_label(self) -> str:
        return KIND_NAMES[self.kind]

    def last_seen(self, total: int) -> str:
        where = SOURCE_LABELS.get(self.last_source, self.last_source)
        return f"{where}, entry {self.last_position + 1:,} of {total:,}"


def items_of(entries: Sequence[ItemsEntry], cwd: str = "") -> list[Item]:
    """Every concrete item of a branch with its salience, most salient first."""
    tally = _Tally(cwd)
    context_from = context_start(entries)
    for position, entry in enumerate(entries):
        if not _is_read(entry):
            continue
        compacted = position < context_from
        tally.last_read = position
        stored = entry.items if entry.items is not None else entry_items(entry)
        for kind, text, source, error in stored:
            tally.add(kind, text, source, bool(error), position, compacted, entry)
    return tally.ranked()


def rank_pieces(texts: Iterable[Piece], cwd: str = "") -> list[Item]:
    """Every concrete item of some labelled texts with its salience, most salient first."""
    tally = _Tally(cwd)
    for piece in texts:
        tally.last_read = piece.position
        for kind, text in concrete(piece.text):
            tally.add(kind, text, piece.source, piece.error, piece.position, False, piece.text)
    return tally.ranked()


class _Tally:
    """Items as their mentions come in, oldest first."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.found: dict[tuple[str, str], Item] = {}
        self.last_read = 0

    def add(
        self,
        kind: str,
        text: str,
        source: str,
        error: bool,
        position: int,
        compacted: bool,
        where: EntryLike | str,
    ) -> None:
        key = (kind, path_key(text, self.cwd) if kind == "path" else _normalised(text) or text)
        item = self.found.get(key)
        if item is None:
            item = self.found[key] = Item(kind, text)
        new_entry = item.last_position != position or not item.mentions
        if new_entry:
            item.mentions += 1
        if source in DISCUSSED and (new_entry or not item.sources & DISCUSSED):
            item.discussed += 1
        item.sources.add(source)
        item.last_position, item.last_source, item.last_where = position, source, where
        item.in_error = item.in_error or error
        item.in_context = item.in_context or not compacted

    def ranked(self) -> list[Item]:
        # Recency runs to the last entry that was read (a handoff exchange at the end is not).
        total = self.last_read + 1
        for item in self.found.values():
            rank(item, total)
        return sorted(self.found.values(), key=lambda item: (-item.salience, item.kind, item.text))


@lru_cache(maxsize=65_536)
def _normalised(text: str) -> str:
    return normalise(text)


def _line_around(text: str, needle: str, width: int = 200) -> str:
    at = text.find(needle)
    if at < 0:
        return ""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : end if end >= 0 else len(text)].strip()
    if len(line) <= width:
        return line
    middle = at - start
    return line[max(0, middle - width // 2) : middle + width // 2].strip()


def rank(item: Item, total: int) -> None:
    """An item's salience: who named it, how often it was discussed, how lately, and whether it
    is part of an error. Seen only in tool output, an item stays below the salient bar, unless
    it is an error near the end of the session (the failure the next session must fix)."""
    base = max(SOURCE_WEIGHTS.get(source, 0.5) for source in item.sources)
    repeated = min(2.0, 0.6 * math.log2(item.discussed)) if item.discussed > 1 else 0.0
    place = (item.last_position + 1) / total
    recent = 1.5 * min(1.0, place / 0.9) ** 2  # full in the last tenth, fading towards the start
    discussed = bool(item.sources & DISCUSSED)
    error = 1.5 if item.kind == "error" or (item.in_error and discussed) else 0.0
    kind = KIND_WEIGHTS.get(item.kind, 0.0)
    if item.kind == "number" and "user" not in item.sources:
        kind = -0.5  # numbers in replies and output are mostly incidental
    salience = base + repeated + recent + error + kind
    if not discussed and not (item.kind == "error" and place >= 0.9):
        salience = min(salience, SALIENT - 1)
    if not item.in_context:  # the session's own compaction left it out of its context
        salience = min(salience, SALIENT - 1)
    item.salience = round(salience, 2)
    reasons = []
    if "user" in item.sources:
        reasons.append("named by the user")
    if item.discussed > 1:
        reasons.append(f"discussed in {item.discussed} entries")
    if place >= 0.8:
        reasons.append("recent")
    if error:
        reasons.append("part of an error")
    if not item.in_context:
        reasons.append("compacted away")
    item.reasons = tuple(reasons)


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
        """The items a handoff must carry that the document does not."""
        return [item for item in self.items if item.salient and not item.carried]

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
    """The old branch's items (handoff exchanges excluded), each checked against the document."""
    items = items_of(old_entries, cwd)
    checked = Document(document)
    checked.mark(items)
    return Coverage(tuple(items), len(old_entries), clipped=checked.clipped)
