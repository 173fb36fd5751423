"""The lineage map (issue 19, item 6): the sessions joined to one by handoffs and forks, drawn
top-down from the first, each under the session it came from; under each, the sessions its
messages mention.

A few queries, one per step outward, at most MAX_SESSIONS sessions: the owner's kept sessions
only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db.models import Q

from . import compaction, mentions, status
from .models import ChatSession, Entry
from .store import MAX_INDENT

MAX_SESSIONS = 200


@dataclass(frozen=True)
class MapRow:
    """One session of the map: how deep it sits, and how it came from the row above it."""

    session: ChatSession
    depth: int
    came_by: str  # "handoff", "fork", "mention" or "" (the first)
    current: bool
    handoff: str = ""  # came by a handoff: its figures ("186k → 9k tokens, $0.41")
    compacted: str = ""  # compacted in place: how often, and the latest one's figures

    @property
    def indent(self) -> int:
        return min(self.depth, MAX_INDENT)


def _origin(session: ChatSession) -> tuple[int | None, str]:
    if session.parent_session_id:
        return session.parent_session_id, "handoff"
    if session.forked_from_id and session.forked_from is not None:
        return session.forked_from.session_id, "fork"
    return None, ""


def map_of(session: ChatSession) -> list[MapRow]:
    """The rows of the map around `session`, first sessions first, depth first."""
    mine = ChatSession.objects.filter(ChatSession.kept(), owner_id=session.owner_id)
    mine = mine.select_related("forked_from")
    found: dict[int, ChatSession] = {session.pk: session}
    frontier = {session.pk}
    while frontier and len(found) < MAX_SESSIONS:
        origins = {_origin(found[pk])[0] for pk in frontier} - {None} - set(found)
        joined = mine.filter(
            Q(pk__in=origins) | Q(parent_session_id__in=frontier)
            | Q(forked_from__session_id__in=frontier)
        ).exclude(pk__in=found)[: MAX_SESSIONS - len(found)]  # fmt: skip
        frontier = set()
        for other in joined:
            found[other.pk] = other
            frontier.add(other.pk)
    under: dict[int | None, list[ChatSession]] = {}
    for other in found.values():
        origin, _ = _origin(other)
        under.setdefault(origin if origin in found else None, []).append(other)
    rows: list[MapRow] = []
    stack = [(first, 0, "") for first in sorted(under.get(None, []), key=_age, reverse=True)]
    while stack:
        other, depth, came_by = stack.pop()
        rows.append(MapRow(other, depth, came_by, other.pk == session.pk))
        if came_by == "mention":
            continue  # a mentioned session's own lineage is its own map
        named = [pk for pk in mentions.mentioned_by(other) if pk not in found]
        shown = mine.in_bulk(named)
        stack += [(shown[pk], depth + 1, "mention") for pk in reversed(named) if pk in shown]
        later = sorted(under.get(other.pk, []), key=_age, reverse=True)
        stack += [(next_, depth + 1, _origin(next_)[1]) for next_ in later]
    return _with_figures(rows)


def _with_figures(rows: list[MapRow]) -> list[MapRow]:
    """Each row that came by a handoff, with its figures, as its seed keeps them, and each
    session's compactions: two queries."""
    handed = [row.session.pk for row in rows if row.came_by == "handoff"]
    roots = Entry.objects.filter(session_id__in=handed, parent__isnull=True).order_by("-pk")
    seeds = dict(roots.values_list("session_id", "data"))  # each session's first root wins
    compactions = Entry.objects.filter(
        session_id__in=[row.session.pk for row in rows], kind=Entry.Kind.COMPACTION
    ).order_by("pk")
    compacted: dict[int, list[tuple[object, object]]] = {}  # figures only, not summaries
    figures = compactions.values_list(
        "session_id", "data__fields__tokensBefore", "data__fields__details"
    )
    for session_id, before, details in figures:
        compacted.setdefault(session_id, []).append((before, details))
    return [
        replace(
            row,
            handoff=status.handoff_figures(seed) if isinstance(seed, dict) else "",
            compacted=_compacted(compacted.get(row.session.pk, [])),
        )
        for row in rows
        for seed in [seeds.get(row.session.pk)]
    ]


def _compacted(each: list[tuple[object, object]]) -> str:
    """ "compacted (186k → 9k tokens, $0.41)", "compacted 3×, last (…)", or "" for none."""
    if not each:
        return ""
    latest = compaction.figures_of(*each[-1])
    said = "compacted" if len(each) == 1 else f"compacted {len(each)}×, last"
    return f"{said} ({latest})" if latest else said.removesuffix(", last")


def _age(session: ChatSession) -> tuple[object, int]:
    return (session.created_at, session.pk)
