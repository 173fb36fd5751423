"""Recall: the sessions a session came from, as a store the model can look things up in and the
user can check (issue 19). A handoff document drops detail; the entries it dropped are still
in the database, in the sessions the lineage joins.

`lineage` is those sessions, nearest first: the one it was handed off from (or forked from),
then that one's, and so on. `recall` searches their words (the full-text index of
`sessions.search`) and returns the best entries, each named by session and entry, so a reply
can cite them and the page can link to them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings

from . import mentions, search
from .models import ChatSession

MAX_LINEAGE = 50  # sessions walked back at most (a chain of handoffs and forks)


@dataclass(frozen=True)
class Recalled:
    """One entry recall found: where it is, who said it, when, and the words around the match."""

    session: int
    entry: int
    role: str
    at: str
    text: str

    def line(self) -> str:
        return f"[session {self.session}, entry {self.entry}, {self.role}, {self.at}] {self.text}"


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
    one. At most one query, none in a session that came from another."""
    if session.parent_session_id is not None or session.forked_from_id is not None:
        return True
    return bool(mentions.mentioned_by(session))


def recallable(session: ChatSession) -> list[int]:
    """The sessions recall reads from `session`: its lineage, nearest first, then the sessions
    its messages mention."""
    found = lineage(session)
    return found + [
        pk for pk in mentions.mentioned_by(session) if pk not in found and pk != session.pk
    ]


def recall(session: ChatSession, query: str, only: int | None = None) -> list[Recalled]:
    """The entries of the lineage (or of session `only`, one of it) that best match `query`,
    nearest session first, newest first within one: at most AGENTWEB_RECALL_ENTRIES entries
    and AGENTWEB_RECALL_CHARS characters of text."""
    words = search.query_of(query)
    if not words:
        raise RecallRefused("Give `query` some words to look for.")
    kept = set(
        ChatSession.objects.filter(ChatSession.kept(), owner_id=session.owner_id).values_list(
            "pk", flat=True
        )
    )
    sessions = [pk for pk in recallable(session) if pk in kept]
    if only is not None:
        if only not in sessions:
            raise RecallRefused(
                f"Session {only} is not one this session came from: recall reads only "
                f"{_named(sessions)}."
            )
        sessions = [only]
    found: list[Recalled] = []
    budget = settings.AGENTWEB_RECALL_CHARS
    for session_id in sessions:
        room = settings.AGENTWEB_RECALL_ENTRIES - len(found)
        if room <= 0 or budget <= 0:
            break
        matches = (
            search.matching_entries(session.owner, words)
            .filter(session_id=session_id)
            .only("pk", "role", "kind", "created_at", "search_text", "session_id")[:room]
        )
        for entry in matches:
            text = search.snippet(entry.search_text, words).plain
            text = text[: max(0, budget)]
            budget -= len(text)
            at = entry.created_at.strftime("%Y-%m-%d %H:%M UTC")
            found.append(Recalled(session_id, entry.pk, entry.role or entry.kind, at, text))
    return found


def _named(sessions: list[int]) -> str:
    if not sessions:
        return "none (this session came from no other)"
    return "sessions " + ", ".join(str(pk) for pk in sessions)


def as_details(query: str, found: list[Recalled]) -> dict[str, object]:
    """What the tool result keeps for the page: the query and each entry found."""
    return {"recall": {"query": query, "entries": [asdict(hit) for hit in found]}}
