"""Changes made outside a generation (a view, a slash command), rendered and shown in every tab
of the session (`sessions.tabs`). Synchronous: call them from a view or a database call."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User

from .. import status, tabs
from ..models import ChatSession, Entry, Preferences
from ..todos import Todo
from . import entry as entry_partial
from . import instructions as instructions_partial
from . import notice, todo_panel, transcript
from . import sidebar as sidebar_partial
from . import status as status_partial
from . import title as title_partial

DELETED = "This session was deleted: restore it from the session list to go on with it."


def entry(session_id: int, added: Entry) -> None:
    """A new entry (a model or thinking change) and the status line after it."""
    session, line = status.read_by_id(session_id)
    html = entry_partial(added) + status_partial(session, line)
    tabs.announce_entry(session_id, added.pk, html)


def deleted(session_ids: list[int]) -> None:
    """These sessions were deleted: their tabs say so, and their sockets close."""
    tabs.close_deleted(session_ids, notice(DELETED, "error"))


def title(session_id: int) -> None:
    """The session's title, as it is now (renamed), in its tabs and every tab's sidebar."""
    session = ChatSession.objects.select_related("owner").get(pk=session_id)
    tabs.announce(session_id, title_partial(session))
    sidebar(session.owner)


def sidebar(owner: User | int) -> None:
    """The owner's sessions changed (a title, a new one, one deleted, pinned, archived): every
    tab of theirs shows its sidebar as it is now."""
    user = owner if isinstance(owner, User) else User.objects.get(pk=owner)
    tabs.announce_to_owner(user.pk, sidebar_partial(user))


def instructions(session_id: int) -> None:
    """The session's instructions, as they are now: every tab's folded block."""
    session = ChatSession.objects.get(pk=session_id)
    owners = Preferences.of_owner(session, "instructions", "owner_instructions") or ""
    tabs.announce(session_id, instructions_partial(session, owners))


def branch(session_id: int) -> None:
    """The session's branch, just switched: its transcript and status line."""
    session, line = status.read_by_id(session_id)
    tabs.announce(session_id, transcript(session) + status_partial(session, line))


def todos(session: ChatSession, todo_list: Sequence[Todo], *, focus: str = "") -> None:
    tabs.announce(session.pk, todo_panel(session, todo_list, focus=focus))
