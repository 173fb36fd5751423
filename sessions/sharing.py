"""Share links: a read-only snapshot of a session, or of its whole chain of handed-off sessions,
for anyone who has the link; revoked, it is gone (404).

A link shares the sessions it names as of the leaf each had when it was made, and nothing
else: a mention of another session shows as its plain `@#id` (no title), a recall result's
links as plain text; the files its messages show are served through the link, no other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F
from django.utils import timezone

from . import attached, listing, transcript
from .content import block_list
from .models import Attachment, ChatSession, Entry, ShareLink
from .tree import path_to

MOST_SHOWN = 400  # entries a shared session shows, the latest (the rest: counted, not shown)


@dataclass(frozen=True)
class SharedPart:
    """One session of a shared page: its title, when it began, the entries shown."""

    session: ChatSession
    title: str  # as it was when the link was made
    entries: list[Entry]
    earlier: int  # entries before those shown, not shown
    handed_off: bool  # it began from a handoff document (a chain's later part)


def create(session: ChatSession, *, chain: bool) -> ShareLink:
    """A new link to the session (or its chain) as it is now."""
    sessions = listing.chain_of(session) if chain else [session]
    parts = [[one.pk, one.leaf_id, one.display_title] for one in sessions if one.leaf_id]
    link = ShareLink(owner_id=session.owner_id, session=session, chain=chain, parts=parts)
    link.files = [
        block["attachment"]
        for part in parts_of(link)
        for entry in part.entries
        for block in block_list(entry.content)
        if attached.is_attached(block)
    ]
    link.save()
    return link


def shared_file(link: ShareLink, attachment_id: int) -> Attachment | None:
    """A file a message of the link shows (None: not one of those)."""
    if attachment_id not in link.files:
        return None
    return Attachment.objects.filter(pk=attachment_id, owner_id=link.owner_id).first()


def current(session: ChatSession) -> ShareLink | None:
    """The session's newest link still in force (what its Share dialog shows)."""
    return ShareLink.objects.filter(ShareLink.active(), session=session).first()


def revoke(owner_id: int, link_id: int) -> bool:
    """End one of the owner's links: whether it was in force."""
    links = ShareLink.objects.filter(ShareLink.active(), pk=link_id, owner_id=owner_id)
    return bool(links.update(revoked_at=timezone.now()))


def of_owner(owner_id: int) -> list[ShareLink]:
    """The owner's links, newest first, with their sessions (Preferences → Shared links)."""
    return list(ShareLink.objects.filter(owner_id=owner_id).select_related("session"))


def in_force(token: str) -> ShareLink | None:
    """The link in force that `token` names; None: unknown or revoked (or its session
    deleted)."""
    return (
        ShareLink.objects.filter(ShareLink.active(), token=token)
        .filter(session__deleted_at__isnull=True)
        .select_related("owner", "session")
        .first()
    )


def opened(token: str) -> ShareLink | None:
    """`in_force`, counted as viewed once more."""
    found = in_force(token)
    if found is not None:
        now = timezone.now()
        ShareLink.objects.filter(pk=found.pk).update(views=F("views") + 1, last_viewed_at=now)
    return found


def parts_of(link: ShareLink) -> list[SharedPart]:
    """What the link shows: each session it names, as of its leaf then (the deleted left out)."""
    ids = [part[0] for part in link.parts]
    sessions = ChatSession.objects.filter(
        ChatSession.kept(), pk__in=ids, owner_id=link.owner_id
    ).in_bulk()
    shown: list[SharedPart] = []
    for session_id, leaf_id, title in link.parts:
        if (session := sessions.get(session_id)) is not None:
            shown.append(_part(session, leaf_id, title, handed_off=bool(shown) and link.chain))
    return shown


def _part(session: ChatSession, leaf_id: int, title: str, *, handed_off: bool) -> SharedPart:
    rows = Entry.objects.filter(session_id=session.pk).values_list("id", "parent_id")
    path = path_to(leaf_id, dict(rows))
    entries = transcript.fold(Entry.in_order(path[-MOST_SHOWN:]))
    return SharedPart(session, title, entries, max(0, len(path) - MOST_SHOWN), handed_off)


def copy_for(link: ShareLink, viewer_id: int) -> ChatSession:
    """Continue in my account: a fork of the shared conversation (its last session, as shared)
    that the viewer owns. `BranchRefused` says why not."""
    session_id, leaf_id, _ = link.parts[-1]
    session = ChatSession.objects.get(pk=session_id, owner_id=link.owner_id)
    return session.fork(leaf_id, owner_id=viewer_id)


def context(link: ShareLink) -> dict[str, Any]:
    parts = parts_of(link)
    title = parts[-1].title if parts else "A shared session"
    return {"link": link, "parts": parts, "title": title, "shared": True}
