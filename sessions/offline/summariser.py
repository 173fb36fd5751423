"""How the offline model writes a document with named sections (a handoff, or notes).

It is extractive and deterministic, and it says where the work stands: the goal is the focus,
or the latest request that set the direction; progress is what was done and what the commands
came to; the critical context names the latest failure word for word; the next steps are the
work still open at the end. Earlier summaries (compactions, notes, an earlier handoff) give
what they kept, except steps that later entries have overtaken. Concrete items are ranked with
the coverage panel's salience.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from .. import todos
from ..items import ACKNOWLEDGED, DECISION, KIND_LABELS, STOPWORDS, normalise
from ..ledger import gone
from ..salience import SALIENT, rank_pieces
from .reading import Reading, Run

SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
FOCUS = re.compile(r"^Additional focus:\s*(.+)$", re.MULTILINE)
SECTION = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.MULTILINE)
CONSTRAINT_WORDS = ("must", "should", "don't", "do not", "never", "always", "prefer", "avoid",
                    "only", "keep ", ", not ", "after each", "every time", "each time",
                    "instead of", "不要", "必须")  # fmt: skip
DONE = re.compile(
    r"\b(?:done|passes|passing|passed|fixed|added|replaced|updated|renamed|merged|pushed|"
    r"tagged|released|deployed|committed|works now|is in|are in)\b",
    re.IGNORECASE,
)
SECTION_KEYS = ("goal", "constraint", "progress", "decision", "context", "next")
LISTED_FROM = SALIENT - 1.0  # items listed in Critical Context: the salient, and the next ones
MAX_LISTED = 80
MIN_LISTED = 20
DIRECTION_WORDS = 5  # a request shorter than this answers, it does not set a direction
RULE_WORDS = 3  # a constraint shorter than this is a fragment
PLACEHOLDER = "Nothing recorded in this session."
TASKS = {"progress": "- [x] ", "next": "- [ ] "}  # sections written as task lists


def write_document(sections: list[str], reading: Reading, request: str, cwd: str = "") -> str:
    """One `## <section>` per requested section, filled from what was read."""
    state = State(reading, request, cwd)
    writers: dict[str, Callable[[], list[str]]] = {
        "goal": state.goal,
        "constraint": state.constraints,
        "progress": state.progress,
        "decision": state.decisions,
        "context": state.critical_context,
        "next": state.next_steps,
    }
    parts: list[str] = []
    for name in sections:
        key = next((k for k in SECTION_KEYS if k in name.lower()), None)
        lines = [line for line in (writers[key]() if key else []) if line.strip()]
        bullets = [_bullet(line, TASKS.get(key or "", "- ")) for line in lines]
        parts.append(f"## {name}\n\n" + "\n".join(bullets or [f"- {PLACEHOLDER}"]))
    return "\n\n".join(parts)


class State:
    """Where the work stands, as the reading tells it."""

    def __init__(self, reading: Reading, request: str, cwd: str) -> None:
        self.reading = reading
        self.request = request
        done = (run.command for run in reading.runs if run.ok)
        ranked = rank_pieces(reading.pieces, cwd, gone(done))
        self.items = [item for item in ranked if not item.superseded]  # no longer current
        self.kept = _kept_sections([summary.text for summary in reading.summaries])
        latest = reading.summaries[-1].at if reading.summaries else -1
        self.directions = [said for said in reading.requests if _direction(said.text)]
        # What came after the latest summary: the summary's own steps are overtaken by it.
        self.since = latest
        self.overtaken = any(said.at > latest for said in self.directions)
        self.failure = _latest_failure(reading.runs)

    def goal(self) -> list[str]:
        """The objective: the focus first when one is given, then the request that set the
        session's direction (an earlier summary's goal, when one was kept), then the latest
        request that refined it."""
        focus = FOCUS.search(self.request)
        first = _direction(self.directions[0].text) if self.directions else ""
        latest = _direction(self.directions[-1].text) if self.directions else ""
        lead = [focus.group(1).strip()] if focus else []
        refined = [f"Most recently: {latest}"] if latest and latest != first else []
        return _unique([*lead, *self.kept["goal"][:2], first, *refined])

    def constraints(self) -> list[str]:
        """The rules the user stated ("e2e tests only", "never touch …"): not their questions,
        nor fragments too short to be a rule."""
        said = _sentences_of([said.text for said in self.reading.requests])
        rules = [s for s in said if not s.endswith("?") and len(s.split()) >= RULE_WORDS]
        return _unique(self.kept["constraint"] + [s[:300] for s in rules if _rule(s)])[:16]

    def progress(self) -> list[str]:
        replies = [said.text for said in self.reading.replies if said.at > self.since]
        echoes = {
            normalise(line)
            for piece in self.reading.pieces
            if piece.source == "tool_result"
            for line in piece.text.splitlines()[:5]
        }
        done = [
            s
            for s in _sentences_of(replies)
            if DONE.search(s) and not s.endswith("?") and normalise(s) not in echoes
        ]  # a tool's own words said again ("Todo list updated.") are no progress
        return _unique(
            self.kept["progress"][:12]
            + todos.in_handoff_request(self.request)
            + [s[:300] for s in done[-6:]]
            + [
                _outcome(run)
                for run in _latest_runs(self.reading.runs, self.since)
                if _changes(run)
            ]
        )

    def decisions(self) -> list[str]:
        chosen = [i.text for i in self.items if i.kind == "decision" and i.salience >= LISTED_FROM]
        return _unique(self.kept["decision"] + chosen)[:16]

    def critical_context(self) -> list[str]:
        failure = []
        if self.failure is not None:
            run = self.failure
            failure = [f"Latest failure: `{run.command}` failed with `{run.error_line}`"]
        return failure + self.kept["context"][:12] + _listed(self.items)

    def next_steps(self) -> list[str]:
        steps = []
        if self.failure is not None:
            steps.append(f"Fix the failing `{self.failure.command}`: {self.failure.error_line}")
        steps += [line for line in todos.in_handoff_request(self.request) if _open(line)]
        last = self.directions[-1] if self.directions else None
        went_on = [said.at for said in self.reading.replies] + [run.at for run in self.reading.runs]
        answered = any(at > last.at for at in went_on) if last else True
        if last is not None and not answered:
            steps.append(f"Answer the last request: {_direction(last.text)}")
        if not self.overtaken:
            steps += self.kept["next"][:8]
        return _unique(steps)


def _direction(text: str) -> str:
    """The sentence of a request that sets a direction ("" when it sets none: a slash command,
    an acknowledgement, a decision, a request too short to mean much alone)."""
    if text.lstrip().startswith("/"):
        return ""
    sentences = [
        s
        for s in _sentences(text.replace("*", ""))
        if not _acknowledges(s) and not DECISION.search(s) and not _rule(s, RULE_ONLY)
    ]
    if sum(len(s.split()) for s in sentences) < DIRECTION_WORDS:
        return ""
    return next((s[:300] for s in sentences if not s.endswith(("?", "？"))), "")


def _rule(sentence: str, words: tuple[str, ...] = CONSTRAINT_WORDS) -> bool:
    """A sentence that states a rule (a constraint or preference)."""
    lowered = f" {sentence.lower()} "
    return any(word in lowered for word in words)


# What makes a sentence a rule rather than a direction ("Port it to streaming, keep the API"
# sets one): a stronger word than `keep` or `should`.
RULE_ONLY = ("must", "don't", "do not", "never", "always", " only", ", not ", "after each",
             "every time", "each time", "instead of", "不要", "必须")  # fmt: skip


def _acknowledges(sentence: str) -> bool:
    words = normalise(sentence).split()
    return bool(words) and all(word in ACKNOWLEDGED or word in STOPWORDS for word in words)


def _latest_failure(runs: list[Run]) -> Run | None:
    """The latest run that failed, unless the same command ran fine after it."""
    for index in range(len(runs) - 1, -1, -1):
        run = runs[index]
        if not run.ok:
            later = runs[index + 1 :]
            return None if any(r.command == run.command and r.ok for r in later) else run
    return None


def _latest_runs(runs: list[Run], since: int, most: int = 8) -> list[Run]:
    """The latest outcome of each command run since `since`, the latest last."""
    latest: dict[str, Run] = {}
    for run in runs:
        if run.at > since:
            latest.pop(run.command, None)
            latest[run.command] = run
    return list(latest.values())[-most:]


def _changes(run: Run) -> bool:
    """A run that did something: not one that only looked (unless it failed)."""
    return not run.ok or not LOOKS.match(run.command)


LOOKS = re.compile(r"^\s*(?:ls|cat|head|tail|less|grep|rg|find|file|pwd|echo|wc|tree|which|"
                   r"git (?:status|diff|log|show|branch))\b")  # fmt: skip


def _outcome(run: Run) -> str:
    if run.ok:
        return f"Ran `{run.command}`: it worked"
    return f"Ran `{run.command}`: it failed (`{run.error_line}`)"


def _open(line: str) -> bool:
    return line.startswith(("- [ ]", "- [~]"))


def _listed(items: list[Any]) -> list[str]:
    """The concrete items worth carrying, most salient first, grouped by kind."""
    candidates = [item for item in items if item.kind != "decision"]
    chosen = [item for item in candidates if item.salience >= LISTED_FROM][:MAX_LISTED]
    if len(chosen) < MIN_LISTED:  # a short conversation: room for everything it named
        chosen = candidates[:MIN_LISTED]
    lines: list[str] = []
    for kind, label in KIND_LABELS.items():
        group = [item.text for item in chosen if item.kind == kind]
        if group:
            lines.append(f"{label}: " + ", ".join(f"`{text}`" for text in group))
    return lines


def _kept_sections(summaries: list[str]) -> dict[str, list[str]]:
    """The lines of each section of the summaries read (compactions, notes, handoffs), newest
    first, so the latest state of the work leads."""
    kept: dict[str, list[str]] = {key: [] for key in SECTION_KEYS}
    for summary in reversed(summaries):
        matches = list(SECTION.finditer(summary))
        for index, match in enumerate(matches):
            key = next((k for k in SECTION_KEYS if k in match.group(1).lower()), None)
            end = matches[index + 1].start() if index + 1 < len(matches) else len(summary)
            if key is None:
                continue
            body = summary[match.end() : end]
            kept[key] += [line.strip() for line in body.splitlines() if _is_content(line)]
    return {key: _unique(lines) for key, lines in kept.items()}


def _is_content(line: str) -> bool:
    text = line.strip().lstrip("-*0123456789.[]x ").strip()
    return bool(text) and not text.startswith("###") and text != PLACEHOLDER


def _bullet(line: str, mark: str = "- ") -> str:
    """A line as an item of its section: a task (`mark` "- [x] " or "- [ ] ") unless it says
    what failed, which is neither done nor a step."""
    line = line.strip()
    if line.startswith(("- [", "### ")) or re.match(r"^\d+\. ", line):
        return line
    text = line[2:] if line.startswith(("- ", "* ")) else line
    failed = mark == "- [x] " and ("it failed" in text or text.startswith("Latest failure"))
    return f"{'- ' if failed else mark}{text}"


def _sentences_of(texts: list[str]) -> list[str]:
    return [sentence for text in texts for sentence in _sentences(text)]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if len(s.strip()) > 3] or [text.strip()]


def _matching(sentences: list[str], words: tuple[str, ...]) -> list[str]:
    return [s[:300] for s in sentences if any(w in s.lower() for w in words)]


def _unique(lines: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = normalise(line.lstrip("-*0123456789.[]x "))
        if line.strip() and key not in seen:
            seen.add(key)
            out.append(line)
    return out
