"""Every tab: the channel-layer groups a socket joins (the tabs of a session, the sockets of a
user), and what is sent to all of them outside a generation's numbered events.

What is sent is html the caller rendered: a view or a consumer renders a partial, a job its
events. This room only knows where it goes.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def session_group(session_id: int) -> str:
    """Every tab of the session, in any process: a generation's events go here."""
    return f"session.{session_id}"


def user_group(user_id: int) -> str:
    """Every socket of one user, so signing out can close those of that sign-in."""
    return f"user.{user_id}"


async def show(session_id: int, html: str) -> None:
    """Show this in every tab of the session."""
    await get_channel_layer().group_send(
        session_group(session_id), {"type": "session.update", "html": html}
    )


async def resync(session_id: int) -> None:
    """Every tab of the session catches up from the database (entries added outside any
    generation's numbered events: a dead process's reply, kept)."""
    await get_channel_layer().group_send(session_group(session_id), {"type": "session.resync"})


def announce(session_id: int, html: str) -> None:
    """`show`, from synchronous code (a view, a database call)."""
    async_to_sync(show)(session_id, html)


async def show_to_owner(user_id: int, html: str) -> None:
    """Show this in every tab of the user's, whichever session it shows (the sidebar)."""
    await get_channel_layer().group_send(
        user_group(user_id), {"type": "session.update", "html": html}
    )


def announce_to_owner(user_id: int, html: str) -> None:
    """`show_to_owner`, from synchronous code."""
    async_to_sync(show_to_owner)(user_id, html)


def announce_entry(session_id: int, entry_id: int, html: str) -> None:
    """An entry added outside a generation (a model change), in every tab once: a tab that
    resynced since has it already."""
    async_to_sync(get_channel_layer().group_send)(
        session_group(session_id), {"type": "session.entry", "entry": entry_id, "html": html}
    )


def recheck_sign_ins(user_id: int, renamed: dict[str, str]) -> None:
    """The user's password changed: each socket checks that its sign-in still holds (closing if
    not); `renamed`, the sign-in that changed it, kept under its new key."""
    async_to_sync(get_channel_layer().group_send)(
        user_group(user_id), {"type": "user.recheck", "renamed": renamed}
    )


def close_deleted(session_ids: list[int], html: str) -> None:
    """These sessions were deleted: their tabs say so (`html`) and close their sockets."""
    send = async_to_sync(get_channel_layer().group_send)
    for session_id in session_ids:
        send(session_group(session_id), {"type": "session.deleted", "html": html})


def close_sockets_of(user_id: int, login: str) -> None:
    """Close the sockets opened with sign-in `login` (every socket of the user when empty)."""
    async_to_sync(get_channel_layer().group_send)(
        user_group(user_id), {"type": "user.logout", "login": login}
    )
