"""The salience of a session's concrete items: who named each, how often it was discussed,
how lately, whether it is part of an error, and whether it is still current (a decision the
user turned down later, a file deleted or renamed since, is not). `sessions.coverage` checks
them against a handoff document; the offline model lists the most salient."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from . import ledger
from .content import EntryLike, Kind, Role
from .context import first_kept, in_context, latest_compaction
from .items import KIND_NAMES, STOPWORDS, Piece, concrete, entry_items, entry_pieces, normalise


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
KIND_WEIGHTS = {"decision": 1.5, "url": 0.5, "error": 1.0, "name": 1.0}
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
    superseded: str = ""  # why it is no longer current: rejected later, a file deleted since
    appended: bool = False  # not in the model's own text, but in what agentweb appended to it
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
    """Every concrete item of a branch with its salience, most salient first; a decision the
    user rejected later, and a file deleted or renamed since, are no longer current."""
    tally = _Tally(cwd)
    context_from = context_start(entries)
    for position, entry in enumerate(entries):
        if not _is_read(entry):
            continue
        compacted = position < context_from
        tally.last_read = position
        if entry.kind == Kind.MESSAGE and entry.role == Role.USER:
            tally.rejects(entry.text, position)
        stored = entry.items if entry.items is not None else entry_items(entry)
        for kind, text, source, error in stored:
            tally.add(kind, text, source, bool(error), position, compacted, entry)
    return tally.ranked(ledger.ledger_of(entries).gone())


def rank_pieces(
    texts: Iterable[Piece], cwd: str = "", gone: dict[str, str] | None = None
) -> list[Item]:
    """Every concrete item of some labelled texts with its salience, most salient first
    (`gone`: the files deleted or renamed since, by path, with what became of them)."""
    tally = _Tally(cwd)
    for piece in texts:
        tally.last_read = piece.position
        if piece.source == "user":
            tally.rejects(piece.text, piece.position)
        for kind, text in concrete(piece.text):
            tally.add(kind, text, piece.source, piece.error, piece.position, False, piece.text)
    return tally.ranked(gone or {})


# A user's words that turn down what came before ("no, don't…", "why would we…").
REJECTION = re.compile(
    r"\b(?:no,? (?:don'?t|do not|not|use|keep|go with|we)|don'?t do (?:that|this)|"
    r"why would (?:we|you)|not (?:that|this) (?:way|approach)|that'?s (?:wrong|not (?:it|right))|"
    r"revert (?:that|it|this)|undo (?:that|it|this)|scrap (?:that|it|this)|"
    r"forget (?:that|it|this)|rather not|"
    r"stop using|we (?:won'?t|will not|shouldn'?t|should not) (?:use|do))\b",
    re.IGNORECASE,
)
REJECTION_REACH = 6  # a rejection with no words in common turns down a decision this recent
# A decision that says it replaces an earlier one ("…instead", "switch to…", "no longer…").
REPLACES = re.compile(
    r"\b(?:instead|rather than|switch(?:ed|ing)? (?:to|over)|replac(?:e|es|ed|ing)|no longer|"
    r"changed? (?:our|my) minds?|from now on|after all)\b",
    re.IGNORECASE,
)


class _Tally:
    """Items as their mentions come in, oldest first."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.found: dict[tuple[str, str], Item] = {}
        self.decisions: list[Item] = []
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
            if kind == "decision":
                if REPLACES.search(text):
                    self.replaces(item, position)
                self.decisions.append(item)
        new_entry = item.last_position != position or not item.mentions
        if new_entry:
            item.mentions += 1
        if source in DISCUSSED and (new_entry or not item.sources & DISCUSSED):
            item.discussed += 1
        item.sources.add(source)
        item.last_position, item.last_source, item.last_where = position, source, where
        item.in_error = item.in_error or error
        item.in_context = item.in_context or not compacted

    def rejects(self, text: str, position: int) -> None:
        """A user's message that turns down an earlier decision: the latest decision that
        shares a word with it (or, sharing none, one of the last few entries) is superseded."""
        if not REJECTION.search(text):
            return
        said = content_words(text)
        decisions = [
            item for item in self.decisions if item.last_position < position and not item.superseded
        ]
        decisions.sort(key=lambda item: -item.last_position)
        for item in decisions:
            shared = said & content_words(item.text)
            if shared or position - item.last_position <= REJECTION_REACH and not said:
                item.superseded = f"rejected later (entry {position + 1:,})"
                return

    def replaces(self, decision: Item, position: int) -> None:
        """A new decision that says it replaces another: the latest earlier decision that
        shares a word with it is superseded ("…use PostgreSQL instead of Redis for the queue"
        replaces "we decided to use Redis for the queue")."""
        said = content_words(decision.text)
        for item in sorted(self.decisions, key=lambda item: -item.last_position):
            earlier = item is not decision and not item.superseded
            if earlier and item.last_position < position and said & content_words(item.text):
                item.superseded = f"replaced later (entry {position + 1:,})"
                return

    def ranked(self, gone: dict[str, str]) -> list[Item]:
        # Recency runs to the last entry that was read (a handoff exchange at the end is not).
        total = self.last_read + 1
        gone_keys = {path_key(path, self.cwd): why for path, why in gone.items()}
        for item in self.found.values():
            if item.kind == "path" and (why := gone_keys.get(path_key(item.text, self.cwd))):
                item.superseded = why
            rank(item, total)
        return sorted(self.found.values(), key=lambda item: (-item.salience, item.kind, item.text))


@lru_cache(maxsize=65_536)
def _normalised(text: str) -> str:
    return normalise(text)


def content_words(text: str) -> set[str]:
    return {w for w in normalise(text).split() if w not in STOPWORDS and len(w) > 3}


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
    if item.superseded:  # no longer current: never what a handoff must carry
        salience = min(salience, SALIENT - 1.5)
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
    if item.superseded:
        reasons.append(item.superseded)
    item.reasons = tuple(reasons)
