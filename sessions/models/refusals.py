"""What a session's methods refuse, in the words a person reads."""

from __future__ import annotations


class Refused(Exception):
    """What the user asked cannot be done now: its message is the reason a person reads, and
    the edge that caught it says so (and gives back what was typed)."""


class BranchRefused(Refused):
    """A branch operation that cannot be done now, with the reason a person reads."""


class SessionDeleted(Exception):
    """The session was deleted: nothing may continue it."""


BUSY_BRANCHING = "Wait for the reply to end (or cancel it) before changing branches."
NOT_AN_ENTRY = "That entry is not part of this session."
FORK_UNDER_WAY = "A fork of yours is still being made: wait until it opens, then fork again."
DELETED_DURING_HANDOFF = "The session was deleted while its handoff ran: no new session was made."
TITLE_REQUIRED = "This field is required."
