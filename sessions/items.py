"""The concrete items an entry mentions: what a new session cannot guess.

File paths, code identifiers, error messages, URLs, numbers with units, and explicit
decisions, found in one pass over each text, noise left out (MIME types, slash-joined prose
words). Pure and deterministic: an entry's items are extracted once, when it is written
(`Entry.items`), and `coverage` ranks them and checks them against a handoff document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .content import EntryLike, Kind, Role
from .context import bash_failed, bash_text
from .shapes import part

URL = re.compile(r"https?://[^\s<>()\[\]`'\"]+[^\s<>()\[\]`'\".,;:!?]")
PATH = re.compile(
    r"(?<![\w/.:-])(?:~?/|\./|\.\./)?(?:[\w.-]+/)+[\w-]+(?:\.[A-Za-z0-9]+)*(?::\d+)?"
    r"|(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|js|ts|tsx|jsx|rs|go|rb|java|kt|c|h|cpp|hpp|cs|md|toml|yaml|yml|json|"
    r"ini|cfg|sh|sql|html|css|txt|lock|env)\b"
)
VERSION = re.compile(  # a release tag or a version: v2.3.1, 1.4.0-beta.2
    r"\bv\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z.]+)?\b"
    r"|(?<![\d.])\b\d+\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:-[0-9A-Za-z.]+)?\b(?!\.\d)"
)
IDENTIFIER = re.compile(
    r"\b[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"  # dotted names, calls
    r"|\b[A-Za-z_][A-Za-z0-9_]*\(\)"  # calls
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # CONSTANT_CASE
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # PascalCase
)
STOP = r"(?=[`\n;]|\.(?:\s|$)|\s(?:see|when|while|because|after)\s|$)"  # where a message ends
ERROR = re.compile(  # an error with its message: a quoted one, or words to a stop
    r"(?:\b[A-Z]\w*(?:Error|Exception)\b"  # an exception's name
    r"|\bE[A-Z]{3,12}\b(?=:)"  # an errno: ENOENT, ECONNREFUSED
    r"|\b(?:error|Error|ERROR|FAILED|fatal|panic)(?=:))"
    r"(?::[ \t]*(?:'[^'\n]{0,100}'|\"[^\"\n]{0,100}\"|[^\n`;]{0,100}?" + STOP + "))?"
    # a compiler's error by its code (TS1005, E0308, CS0103): its message may quote code
    r"|\b(?:error|Error|ERROR)\s?\[?[A-Z]{1,4}\d{3,5}\]?(?=:)"
    r"(?::[ \t]*(?:'[^'\n]{0,100}'|\"[^\"\n]{0,100}\"|(?<=\w)'(?=\w)|[^\n`;'\"]){0,100}?"
    + STOP
    + ")?"
    r"|npm ERR! code [A-Z0-9_]+"
    r"|\b(?:exited with|exit|with exit) (?:code|status) [1-9]\d*\b"  # an exit code that failed
    r"|\breturned non-zero exit status [1-9]\d*\b"
)
NUMBER = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:thousand|million|billion|trillion)(?:\s[a-z]{3,12}\b)?"  # scale
    r"|\b\d+(?:[.,]\d+)?\s?(?:ms|µs|us|ns|s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|"
    r"KB|MB|GB|TB|KiB|MiB|GiB|TiB|%|px|rem|em|tokens?|req/s|rps|qps|fps|Hz|kHz|MHz|GHz|°C|k|"
    r"rows|users|requests|records|entries|lines|files|bytes|cores|workers|replicas)\b"
    r"|\b\d+(?:\.\d+)?%"
    r"|\b\d{1,3}(?:_\d{3})+\b"  # an underscored literal: 500_000
    r"|(?<![\d:])\b(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?:\s?[ap]m\b)?(?![\d:])"  # a time
)
# A colour the user dictates: #2E3440 (six digits), or #fa0 (three, one a letter: #481 is an
# issue's number).
COLOUR = re.compile(r"#(?:[0-9a-fA-F]{6}|(?=[0-9]*[a-fA-F])[0-9a-fA-F]{3})(?![\w-])")
# A name the user gives something ("…is called Marigold Bistro", "named “Nord Light”"): up to
# four capitalised words after `called` or `named`.
NAME = re.compile(r"[A-Z][\w'&-]*(?:\s[A-Z][\w'&-]*){0,3}")
NAMED = "|".join(
    f"(?<=\\b{verb} {quote})" for verb in ("called", "named") for quote in ("", '"', "“", "'")
)
DECISION = re.compile(
    r"\b(?:decided|decision|we'll use|we will use|let's use|going with|chose|agreed|"
    r"instead of|settled on)\b",
    re.IGNORECASE,
)
# A sentence in which the assistant narrates what it does now ("I'll use grep instead of …"):
# the work going on, not a decision about it.
NARRATION = re.compile(
    r"^(?:now |first |next |then |ok(?:ay)?,? )?(?:i'll|i will|i'm|i am|i've|i have|i'd|let me)\b",
    re.IGNORECASE,
)
# The words of an answer that only agrees ("Sounds good, agreed."): no decision in them.
ACKNOWLEDGED = frozenset({
    "sounds", "good", "great", "ok", "okay", "yes", "yeah", "yep", "sure", "fine", "perfect",
    "thanks", "thank", "you", "cool", "nice", "alright", "right", "so", "then", "all",
})  # fmt: skip
STOPWORDS = frozenset({
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "we", "will", "use",
    "let's", "lets", "is", "are", "be", "it", "this", "that", "instead", "than", "from", "as",
    "by", "at", "our", "us", "decided", "decision", "going", "chose", "agreed", "settled",
})  # fmt: skip
SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
KIND_NAMES = {
    "path": "File path",
    "identifier": "Code identifier",
    "error": "Error message",
    "url": "URL",
    "number": "Number",
    "decision": "Decision",
    "name": "Name",
}
KIND_LABELS = {
    "path": "File paths",
    "identifier": "Code identifiers",
    "error": "Error messages",
    "url": "URLs",
    "number": "Numbers",
    "decision": "Decisions",
    "name": "Names",
}


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
                found.setdefault((str(match.lastgroup).rstrip("_"), value), None)
        if DECISION.search(text):  # a decision is the whole sentence that states it
            for sentence in SENTENCE.findall(text):
                if DECISION.search(sentence):
                    decision = " ".join(sentence.replace("**", "").split()).lstrip("-*+ ")
                    found.setdefault(("decision", decision), None)
    return list(found)


# One pattern for all kinds, each behind a guard on the character it can start with, so that a
# position where it cannot start costs one test, not one per alternative. A path and an
# identifier are guarded by what every one of them has within its first word, found in one
# scan that never backs up (a possessive `*+`): a path's first character outside `[\w~-]` is a
# slash or a dot; an identifier's first outside `[a-z0-9]` is one of `._(` or a capital. A
# plain word ("token5", "the") is passed over without the alternatives' backtracking.
SPANNING = re.compile(
    "|".join(
        f"(?P<{kind}>{guard}(?:{pattern.pattern}))"
        for kind, guard, pattern in (
            ("url", "(?=h)", URL),
            ("error", r"\b(?=[A-Zefnprw])", ERROR),
            ("path", r"(?<![\w/.-])(?=[\w~-]*+[/.])", PATH),
            ("identifier", r"\b(?=[v\d])", VERSION),
            ("name", f"(?=[A-Z])(?:{NAMED})", NAME),
            ("identifier_", r"\b(?=[A-Za-z_])(?=[a-z0-9]*+[._(A-Z])", IDENTIFIER),
            ("number", r"\b(?=\d)", NUMBER),
            ("number_", r"(?<![\w&#])(?=#)", COLOUR),
        )
    )
)


def _clean(value: str) -> str:
    value = value.strip().strip("`")
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value if len(value) >= 3 else ""


# --- noise ----------------------------------------------------------------------------------
MIME = re.compile(
    r"^(?:application|audio|font|image|message|model|multipart|text|video)/[\w.+-]+$", re.I
)
CODE_FOLDERS = frozenset({
    "src", "lib", "libs", "test", "tests", "spec", "app", "apps", "docs", "doc", "scripts", "bin",
    "config", "configs", "pkg", "cmd", "internal", "packages", "legacy", "static", "templates",
    "public", "include", "vendor", "migrations", "bench", "tools", "examples", "assets",
})  # fmt: skip


# The hosts documentation uses for examples (RFC 2606), and where macOS puts screenshots and
# other files on their way somewhere: a bare address or a path there is no item.
EXAMPLE_HOST = re.compile(r"^https?://(?:www\.)?example\.(?:com|org|net)/?$", re.I)
SCRATCH = re.compile(r"^(?:/private)?/var/folders/|/TemporaryItems/|^/tmp/[^/]*screencapture", re.I)
CODE_AFTER_ERROR = re.compile(r"^(?:error|Error|ERROR)\s*:\s*(?:[A-Za-z_][\w.]*\s*[,{(]?)?$")


def is_noise(kind: str, text: str) -> bool:
    """What looks like an item and is none: MIME types, prose words joined by a slash (`r/g`,
    `date/time`), scratch paths and example addresses; `error:` before a code's name (`error:
    ColorValueSchema,` is a field of an object); a name too short to mean anything alone
    (`bgFn`); a decision that says only that one was made (`Agreed!`), or that narrates the
    work as it goes (`I'll use grep instead of find`)."""
    if kind == "path":
        return bool(MIME.match(text) or SCRATCH.search(text)) or _prose_pair(text)
    if kind == "url":
        return bool(EXAMPLE_HOST.match(text))
    if kind == "error":
        return bool(CODE_AFTER_ERROR.match(text))
    if kind == "identifier":
        return len(text) < 5 and not VERSION.fullmatch(text)
    if kind == "decision":
        words = [w for w in normalise(text).split() if w not in STOPWORDS | ACKNOWLEDGED]
        return not words or bool(NARRATION.match(text))
    return False


def _prose_pair(text: str) -> bool:
    segments = text.split("/")
    return (
        len(segments) == 2
        and all(segment.isalpha() for segment in segments)
        and segments[0].lower() not in CODE_FOLDERS
    )


@dataclass(frozen=True)
class Piece:
    """A stretch of text of one entry, with where it came from."""

    text: str
    source: str
    position: int  # the entry's index on the branch
    error: bool = False
    compacted: bool = False  # before the latest compaction's kept entries: no longer in context


def entry_items(entry: EntryLike) -> list[list[Any]]:
    """The concrete items one entry mentions, as [kind, text, source, error]: extracted once,
    when the entry is written (entries never change), and kept in `Entry.items`."""
    found: dict[tuple[str, str, str], bool] = {}
    for piece in entry_pieces(entry):
        for kind, text in concrete(piece.text):
            key = (kind, text, piece.source)
            found[key] = found.get(key, False) or piece.error
    return [[kind, text, source, error] for (kind, text, source), error in found.items()]


def concrete(text: str) -> list[tuple[str, str]]:
    """The (kind, text) items of a text, noise left out."""
    return [(kind, item) for kind, item in extract([text]) if not is_noise(kind, item)]


def entry_pieces(entry: EntryLike) -> Iterator[Piece]:
    """An entry's texts, labelled by source (positions are the caller's)."""
    if entry.kind == Kind.CUSTOM_MESSAGE:
        yield Piece(entry.text, "custom", 0)
    elif entry.kind in (Kind.COMPACTION, Kind.BRANCH_SUMMARY):
        yield Piece(entry.text, "summary", 0)
    elif entry.kind == Kind.MESSAGE:
        yield from _message_pieces(entry, 0)


def _message_pieces(entry: EntryLike, position: int) -> Iterator[Piece]:
    message = part(entry.data, "message")
    if entry.role == "bashExecution":
        failed = bash_failed(message)
        yield Piece(str(message.get("command", "")), "bash_command", position)
        yield Piece(bash_text({**message, "command": ""}), "tool_result", position, failed)
        return
    if entry.role == Role.TOOL_RESULT:
        yield Piece(entry.text, "tool_result", position, bool(message.get("isError")))
        return
    source = "user" if entry.role == Role.USER else "assistant"
    for block in entry.content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield Piece(block["text"], source, position)
        elif block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
            yield Piece(block["thinking"], "thinking", position)
        elif block.get("type") == "toolCall":  # what it acted on: the arguments' values
            arguments = block.get("arguments")
            values = arguments.values() if isinstance(arguments, dict) else [arguments]
            yield Piece("\n".join(str(v) for v in values if v is not None), "tool_call", position)
