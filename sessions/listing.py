"""The session list: sessions grouped into chains of handoffs, filtered, a page at a time.

A chain is every session sharing one `chain_root` (the root has none). Pages
are pages of chains, newest activity first; five queries per page however
many sessions a user has, the last two reading only the entries written since
the process last counted each session listed (`MESSAGES`, `usage.SUMMED`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Case, Count, F, IntegerField, Max, Q, QuerySet, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from . import search, usage
from .care import UNTOUCHED
from .models import ChatSession, Entry
from .statements import Statement
from .tallies import Tally, reading_ahead_of_many
from .usage import Usage

CHAINS_PER_PAGE = 20


@dataclass
class Chain:
    sessions: list[ChatSession] = field(default_factory=list)  # root first, newest last
    matched: set[int] = field(default_factory=set)
    used: dict[int, Usage] = field(default_factory=dict)  # each session's tokens and cost

    @property
    def usage(self) -> Usage:
        """The chain's total across its handoffs."""
        return sum(self.used.values(), Usage())

    holds_current: bool = False  # the session a page shows is one of its parts

    @property
    def newest(self) -> ChatSession:
        return self.sessions[-1]

    @property
    def last_activity(self) -> datetime:
        return max(s.updated_at for s in self.sessions)


CHAIN = Coalesce(F("chain_root_id"), F("id"))


def matching(owner: User, query: str) -> QuerySet[ChatSession]:
    """Sessions whose title or any entry's words contain `query` (any case, any accents),
    archived ones included."""
    texts = search.matching_entries(owner, query).order_by().values("session_id")
    mine = ChatSession.objects.filter(ChatSession.kept(), owner=owner)
    if connection.vendor in ("sqlite", "postgresql"):  # titles, too, whatever their accents
        mine = mine.alias(bare_title=search.without_accents("title"))
        return mine.filter(Q(bare_title__icontains=search.folded(query)) | Q(pk__in=texts))
    return mine.filter(Q(title__icontains=query) | Q(pk__in=texts))


PINNED = Max(Case(When(pinned=True, then=1), default=0, output_field=IntegerField()))


def chain_page(
    owner: User,
    query: str = "",
    page_number: str | int | None = 1,
    *,
    archived: bool = False,
    counted: bool = True,
) -> tuple[Page, list[Chain]]:
    """A page of chains, pinned ones first, then the latest active: the sessions in the list,
    or (`archived`) those archived, or those that match `query`, archived or not. `counted`:
    each session's messages and usage too, from the process's tallies."""
    shown = ChatSession.objects.filter(ChatSession.kept(), owner=owner).exclude(UNTOUCHED)
    if not query:
        shown = shown.filter(archived_at__isnull=not archived)
    sessions = shown
    matched: set[int] = set()
    if query:
        matched_rows = list(matching(owner, query).values_list("pk", "chain_root_id"))
        matched = {pk for pk, _ in matched_rows}
        sessions = sessions.filter(ChatSession.in_chains(root or pk for pk, root in matched_rows))
    chains = (
        sessions.annotate(chain=CHAIN)
        .values("chain")
        .annotate(last=Max("updated_at"), pin=PINNED)
        .order_by("-pin", "-last", "-chain")
    )
    page = Paginator(chains, CHAINS_PER_PAGE).get_page(page_number)
    chain_ids = [row["chain"] for row in page.object_list]
    members = shown.filter(ChatSession.in_chains(chain_ids)).order_by("created_at", "pk")
    by_chain = {chain_id: Chain(matched=matched) for chain_id in chain_ids}
    for session in members:
        by_chain[session.chain_id].sessions.append(session)
    if counted:
        listed = [session for chain in by_chain.values() for session in chain.sessions]
        with reading_ahead_of_many(listed, MESSAGES, usage.SUMMED):
            for session in listed:
                session.messages = MESSAGES.of(session)  # type: ignore[attr-defined]
            for chain in by_chain.values():
                chain.used = {session.pk: usage.of_session(session) for session in chain.sessions}
    return page, [by_chain[chain_id] for chain_id in chain_ids]


# Each session's messages, counted by the process and brought up to date from the entries
# written since: counted anew at every view, a page of long sessions read every entry of each
# (115-140 ms beside 15 sessions of 10,000 entries, bench/many_sessions.py).
def _messages(entries: QuerySet[Entry, Any], *before: str) -> QuerySet[Entry, Any]:
    """How many of each session's `entries` are messages, and the last of them all (`before`:
    columns ahead of those two)."""
    return (
        entries.values("session_id")
        .annotate(n=Count("pk", filter=Q(kind=Entry.Kind.MESSAGE)), last=Max("id"))
        .values_list(*before, "n", "last")
    )


MESSAGES_SINCE: Statement[Entry] = Statement(
    lambda session_id, after: _messages(Entry.objects.filter(session_id=session_id, pk__gt=after)),
    session_id=int,
    after=int,
)
MESSAGES: Tally[tuple[int, int], int] = Tally(
    MESSAGES_SINCE,
    last=lambda row: int(row[1]),
    fold=lambda count, rows: count + sum(int(n) for n, _ in rows),
    empty=0,
    many=lambda new: _messages(Entry.objects.filter(new), "session_id"),
)


SIDEBAR_CHAINS = 15


def recent_chains(owner: User, current: ChatSession | None = None) -> list[Chain]:
    """The sidebar beside a session: the owner's latest chains (pinned first), the one that
    holds `current` marked (and listed, however old; none: a push to every tab, which marks
    its own). It shows no counts: reading every entry of every session listed for them took
    100-135 ms beside 15 sessions of 10,000 entries."""
    _, chains = chain_page(owner, counted=False)
    chains = chains[:SIDEBAR_CHAINS]
    if current is None:
        return chains
    if not any(current.pk in {s.pk for s in chain.sessions} for chain in chains):
        chains.append(Chain(sessions=chain_of(current)))
    for chain in chains:
        chain.holds_current = current.pk in {s.pk for s in chain.sessions}
    return chains


SIDEBAR_GROUPS = ("Pinned", "Today", "Yesterday", "Previous 7 days", "Older")


def sidebar_groups(chains: list[Chain]) -> list[tuple[str, list[Chain]]]:
    """The sidebar's chains under Pinned, Today, Yesterday, Previous 7 days and Older (by their
    last activity, in the server's time zone); empty groups left out."""
    today = timezone.localdate()
    grouped: dict[str, list[Chain]] = {label: [] for label in SIDEBAR_GROUPS}
    for chain in chains:
        days = (today - timezone.localdate(chain.last_activity)).days
        if any(session.pinned for session in chain.sessions):
            label = "Pinned"
        else:
            label = (
                "Today"
                if days <= 0
                else "Yesterday"
                if days == 1
                else ("Previous 7 days" if days <= 7 else "Older")
            )
        grouped[label].append(chain)
    return [(label, listed) for label, listed in grouped.items() if listed]


def chain_of(session: ChatSession) -> list[ChatSession]:
    """Every session of the session's chain, oldest first."""
    return list(
        ChatSession.objects.filter(
            ChatSession.kept(), ChatSession.in_chains([session.chain_id]), owner_id=session.owner_id
        ).order_by("created_at", "pk")
    )


def handed_off_from(old: ChatSession, new: ChatSession, chain: list[ChatSession]) -> int | None:
    """The entry of `old` that the next session on the way to `new` was handed off from.

    Walks from `new` up its parents within the chain; a parent outside it (its root was
    deleted) or a loop ends the walk.
    """
    by_id = {session.pk: session for session in chain}
    step, seen = new, {new.pk}
    while step.parent_session_id and step.parent_session_id != old.pk:
        parent = by_id.get(step.parent_session_id)
        if parent is None or parent.pk in seen:
            return None
        seen.add(parent.pk)
        step = parent
    return step.handed_off_from_id if step.parent_session_id == old.pk else None
