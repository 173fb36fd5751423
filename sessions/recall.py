"""Recall: the sessions a session came from, as a store the model can look things up in and the
user can check (issue 19). A handoff document drops detail; the entries it dropped are still
in the database, in the sessions the lineage joins.

`lineage` is those sessions, nearest first: the one it was handed off from (or forked from),
then that one's, and so on. `recall` searches their words (the full-text index of
`sessions.search`) and returns the best entries, each named by session and entry, so a reply
can cite them and the page can link to them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db.models import Q, QuerySet

from . import mentions, salience, search
from .models import ChatSession, Entry, Preferences

MAX_LINEAGE = 50  # sessions walked back at most (a chain of handoffs and forks)


@dataclass(frozen=True)
class Recalled:
    """One entry recall found: where it is, who said it, when, and the words around the match."""

    session: int
    entry: int
    role: str
    at: str
    text: str
    revised_by: int | None = None  # a later message of the user's that turned it down

    def line(self) -> str:
        later = f" (later revised: entry {self.revised_by})" if self.revised_by else ""
        where = f"session {self.session}, entry {self.entry}, {self.role}, {self.at}"
        return f"[{where}] {self.text}{later}"


class RecallRefused(ValueError):
    """A recall that cannot be run; the message goes back to the model."""


def lineage(session: ChatSession) -> list[int]:
    """The ids of the sessions `session` came from, nearest first (handoffs and forks)."""
    found: list[int] = []
    current: int | None = session.pk
    while current is not None and len(found) < MAX_LINEAGE:
        row = (
            ChatSession.objects.filter(pk=current)
            .values_list("parent_session_id", "forked_from__session_id")
            .first()
        )
        current = (row[0] or row[1]) if row else None
        if current is None or current in found or current == session.pk:
            break
        found.append(current)
    return found


def offered(session: ChatSession) -> bool:
    """Whether recall has anywhere to read from `session`: it was handed off or forked from
    another (its own columns say so: a session's origin never changes), or its messages mention
    one, or its owner lets recall read all their sessions. At most two queries, none in a
    session that came from another, nor in one read with its claim (which reads the owner's
    preference)."""
    if session.parent_session_id is not None or session.forked_from_id is not None:
        return True
    if session.compacted_at is not None:  # what its own compaction left out of its context
        return True
    return bool(mentions.mentioned_by(session)) or everywhere(session)


def recallable(session: ChatSession) -> list[int]:
    """The sessions recall reads from `session`: its lineage, nearest first, then the sessions
    its messages mention."""
    found = lineage(session)
    return found + [
        pk for pk in mentions.mentioned_by(session) if pk not in found and pk != session.pk
    ]


def readable(session: ChatSession) -> list[int]:
    """The sessions recall reads from `session`: its lineage and the sessions it mentions (the
    owner's kept ones); with the owner's preference *Let the model recall from all my
    sessions*, every kept session of theirs but this one."""
    kept = ChatSession.objects.filter(ChatSession.kept(), owner_id=session.owner_id)
    if everywhere(session):
        return list(
            kept.exclude(pk=session.pk).order_by("-updated_at").values_list("pk", flat=True)
        )
    mine = set(kept.values_list("pk", flat=True))
    return [pk for pk in recallable(session) if pk in mine]


def everywhere(session: ChatSession) -> bool:
    """Whether the owner lets the model recall from all their sessions (as the session's claim
    read it, when it did)."""
    return bool(Preferences.of_owner(session, "recall_everywhere", "recalls_everywhere"))


def recall(session: ChatSession, query: str, only: int | None = None) -> list[Recalled]:
    """The entries of the sessions recall reads (or of session `only`, one of them) that best
    match `query`: those that hold the most of its words, the rarer words weighing more (an
    entry need not hold them all), the newest first among equals. At most
    AGENTWEB_RECALL_ENTRIES entries and AGENTWEB_RECALL_CHARS characters of text."""
    words = search.query_of(query)
    if not words:
        raise RecallRefused("Give `query` some words to look for.")
    sessions = readable(session)
    compacted = session.compacted_at  # its own entries above its latest compaction
    if only is not None:
        if only not in sessions and not (only == session.pk and compacted is not None):
            raise RecallRefused(
                f"Session {only} is not one this session came from: recall reads only "
                f"{_named(sessions)}."
            )
        sessions = [only] if only != session.pk else []
    within = Q(session_id__in=sessions)
    if compacted is not None and only in (None, session.pk):
        within |= Q(session_id=session.pk, pk__lt=compacted)
    # Not agentweb's own handoff requests: boilerplate, and the work ledger already written out.
    entries = Entry.objects.filter(within).exclude(
        role=Entry.Role.USER, data__has_key="purpose", data__purpose="handoff"
    )
    found: list[Recalled] = []
    budget = settings.AGENTWEB_RECALL_CHARS
    for entry, term in best(entries, search.terms_of(words))[: settings.AGENTWEB_RECALL_ENTRIES]:
        if budget <= 0:
            break
        text = search.snippet(entry.search_text, words, around=term).plain[:budget]
        budget -= len(text)
        at = entry.created_at.strftime("%Y-%m-%d %H:%M UTC")
        role = entry.role or entry.kind
        found.append(Recalled(entry.session_id, entry.pk, role, at, text, revised_by(entry)))
    return found


def best(entries: QuerySet[Entry], terms: search.Terms) -> list[tuple[Entry, str]]:
    """`entries` that hold any of `terms`, best first, each with the rarest term it holds (its
    snippet is shown around it). An entry scores the weight of each term it holds, a term
    weighing more the fewer entries hold it (BM25's inverse document frequency); the newest
    wins a tie. Each term brings its CANDIDATES newest entries, so a rare term's are never
    crowded out by a common one's."""
    each = [(word, search.Terms((word,), (), word)) for word in terms.words]
    each += [(" ".join(p), search.Terms((), (p,), " ".join(p))) for p in terms.phrases]
    if not each:  # no words at all (signs, emoji): the text as written, newest first
        as_written = search.with_words(entries).filter(search.holding(terms))
        matched = as_written.order_by("-created_at", "-pk").only(*FIELDS)[:CANDIDATES]
        return [(entry, terms.rest) for entry in matched]
    total = entries.count()
    weights: dict[str, float] = {}
    picked: set[int] = set()
    for shown, alone in each:
        holding = search.with_words(entries).filter(search.holding(alone))
        ids = list(holding.order_by("-created_at", "-pk").values_list("pk", flat=True)[:CANDIDATES])
        held = len(ids) if len(ids) < CANDIDATES else holding.count()
        weights[shown] = math.log(1 + (total - held + 0.5) / (held + 0.5)) if held else 0.0
        picked.update(ids)
    scored = []
    for entry in Entry.objects.filter(pk__in=picked).only(*FIELDS):
        text = search.folded(entry.search_text)
        holds = [term for term in weights if weights[term] and search.holds(text, term)]
        if holds:
            rarest = max(holds, key=lambda term: (weights[term], len(term)))
            score = sum(weights[term] for term in holds)
            scored.append((-score, -entry.created_at.timestamp(), -entry.pk, entry, rarest))
    scored.sort(key=lambda row: row[:3])
    return [(row[3], row[4]) for row in scored]


CANDIDATES = 200  # the newest entries that hold a term, taken for the ranking
FIELDS = ("pk", "role", "kind", "created_at", "search_text", "session_id")


REVISION_REACH = 20  # the user's messages after an entry looked at for one that turns it down


def revised_by(entry: Entry) -> int | None:
    """The user's later message in the entry's session (one of the next REVISION_REACH) that
    turns down or replaces what it says ("no, don't…", "why would we…", "…instead", sharing
    its words), or None."""
    said = salience.content_words(entry.search_text)
    later = Entry.objects.filter(
        session_id=entry.session_id, pk__gt=entry.pk, kind=Entry.Kind.MESSAGE, role=Entry.Role.USER
    )
    for pk, text in later.order_by("pk").values_list("pk", "search_text")[:REVISION_REACH]:
        turned = salience.REJECTION.search(text) or salience.REPLACES.search(text)
        if turned and said & salience.content_words(text):
            return int(pk)
    return None


def _named(sessions: list[int]) -> str:
    if not sessions:
        return "none (this session came from no other)"
    return "sessions " + ", ".join(str(pk) for pk in sessions)


def as_details(query: str, found: list[Recalled], *, everywhere: bool = False) -> dict[str, object]:
    """What the tool result keeps for the page: the query, each entry found, and whether it read
    all the owner's sessions (their preference)."""
    entries = [asdict(hit) for hit in found]
    return {"recall": {"query": query, "entries": entries, "everywhere": everywhere}}
