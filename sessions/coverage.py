"""What a handoff document carries: the old session's concrete items, each carried or not.

Items are what a new session cannot guess: file paths, code identifiers, error
messages, URLs, numbers with units, and explicit decisions. Matching forgives
casing, separators (`parse_config` ~ `parseConfig` ~ "parse config") and a
path written as its file name; a decision counts as carried when most of its
content words are in the document. Deterministic, no model call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .models import Entry

URL = re.compile(r"https?://[^\s<>()\[\]`'\"]+[^\s<>()\[\]`'\".,;:!?]")
PATH = re.compile(
    r"(?<![\w/.:-])(?:~?/|\./|\.\./)?(?:[\w.-]+/)+[\w-]+(?:\.[A-Za-z0-9]+)?(?::\d+)?"
    r"|(?<![\w/.-])[\w-]+\.(?:py|js|ts|tsx|jsx|rs|go|rb|java|kt|c|h|cpp|hpp|cs|md|toml|yaml|yml|json|"
    r"ini|cfg|sh|sql|html|css|txt|lock|env)\b"
)
IDENTIFIER = re.compile(
    r"\b[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"  # dotted names, calls
    r"|\b[A-Za-z_][A-Za-z0-9_]*\(\)"  # calls
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # CONSTANT_CASE
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # PascalCase
)
ERROR = re.compile(  # an exception name, or `error:`, with its message: quoted, or to a stop
    r"(?:\b[A-Z]\w*(?:Error|Exception)\b|\b(?:error|ERROR|FAILED|fatal)(?=:))"
    r"(?::[ \t]*(?:'[^'\n]{0,100}'|\"[^\"\n]{0,100}\"|[^\n`;]{0,100}?"
    r"(?=[`\n;]|\.(?:\s|$)|\s(?:see|when|while|because|after)\s|$)))?"
)
NUMBER = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns|s|sec|seconds?|min|minutes?|h|hours?|KB|MB|GB|TB|KiB|MiB|GiB|"
    r"%|px|rem|em|tokens?|req/s|rps|qps|fps|Hz|kHz|MHz|GHz|°C|k)\b|\b\d+(?:\.\d+)?%"
)
DECISION = re.compile(
    r"\b(?:decided|decision|we'll use|we will use|let's use|going with|chose|agreed|"
    r"instead of|settled on)\b",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
STOPWORDS = frozenset({
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "we", "will", "use",
    "let's", "lets", "is", "are", "be", "it", "this", "that", "instead", "than", "from", "as",
    "by", "at", "our", "us", "decided", "decision", "going", "chose", "agreed", "settled",
})  # fmt: skip
KIND_LABELS = {
    "path": "File paths",
    "identifier": "Code identifiers",
    "error": "Error messages",
    "url": "URLs",
    "number": "Numbers",
    "decision": "Decisions",
}


@dataclass(frozen=True)
class Item:
    kind: str
    text: str
    carried: bool


@dataclass(frozen=True)
class Coverage:
    items: tuple[Item, ...]

    @property
    def carried(self) -> int:
        return sum(item.carried for item in self.items)

    @property
    def missing(self) -> tuple[Item, ...]:
        return tuple(item for item in self.items if not item.carried)

    def by_kind(self) -> list[tuple[str, list[Item]]]:
        groups = [
            (label, [i for i in self.items if i.kind == kind])
            for kind, label in KIND_LABELS.items()
        ]
        return [(label, items) for label, items in groups if items]


def normalise(text: str) -> str:
    """Lowercase words with camelCase, snake_case, kebab-case and dots split apart."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def extract(texts: Iterable[str]) -> list[tuple[str, str]]:
    """The concrete items of some texts, as (kind, text), first appearance first, no repeats."""
    found: dict[tuple[str, str], None] = {}
    for text in texts:
        # One pass: at each position the first kind that matches wins, and the scan goes on
        # after it, so a path inside a URL or an identifier inside an error is not found twice.
        for match in SPANNING.finditer(text):
            if value := _clean(match.group(0)):
                found.setdefault((str(match.lastgroup), value), None)
        if DECISION.search(text):  # a decision is the whole sentence that states it
            for sentence in SENTENCE.findall(text):
                if DECISION.search(sentence):
                    found.setdefault(("decision", " ".join(sentence.split())), None)
    return list(found)


SPANNING = re.compile(
    "|".join(
        f"(?P<{kind}>{pattern.pattern})"
        for kind, pattern in (
            ("url", URL),
            ("error", ERROR),
            ("path", PATH),
            ("identifier", IDENTIFIER),
            ("number", NUMBER),
        )
    )
)


def _clean(value: str) -> str:
    value = value.strip().strip("`")
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value if len(value) >= 3 else ""


def is_carried(kind: str, item: str, document: str, words: frozenset[str]) -> bool:
    """Whether the normalised document mentions the item, allowing for other casing or words."""
    if kind == "decision":
        content = [w for w in normalise(item).split() if w not in STOPWORDS and len(w) > 2]
        return bool(content) and sum(w in words for w in content) / len(content) >= 0.6
    if kind == "error":
        head = item.split(":")[0]
        rest = [w for w in normalise(item.partition(":")[2]).split() if len(w) > 3][:4]
        return mentions(document, head) and all(w in words for w in rest)
    if kind == "path":
        name = item.rstrip("/").rsplit("/", 1)[-1]
        return mentions(document, item) or (len(normalise(name)) > 3 and mentions(document, name))
    return mentions(document, item)


def mentions(document: str, phrase: str) -> bool:
    """Whole-word containment in a normalised, space-padded document."""
    return f" {normalise(phrase)} " in document


def coverage(old_entries: Sequence[Entry], document: str) -> Coverage:
    """The old session's items (its handoff exchanges excluded), checked against the document."""
    texts = (
        entry.text
        for entry in old_entries
        if entry.kind == Entry.Kind.MESSAGE
        and entry.data.get("purpose") != "handoff"
        or entry.kind == Entry.Kind.CUSTOM_MESSAGE
    )
    normalised = f" {normalise(document)} "
    words = frozenset(normalised.split())
    items = tuple(
        Item(kind, text, is_carried(kind, text, normalised, words)) for kind, text in extract(texts)
    )
    return Coverage(items)
