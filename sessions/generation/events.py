"""What the engine tells the page, as typed events: never HTML, never a URL.

A job publishes these through its relay, which numbers them for the session's tabs; the
rendering layer's `events` module (in the partials package) turns each into the page's
partials, once, in the process that runs the job. `Render` is that function, given to the job
where it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..models import ChatSession, Entry, ToolQuestion
from ..status import StatusLine


@dataclass(frozen=True)
class StatusShown:
    """The status line, as it stands now."""

    session: ChatSession
    line: StatusLine


@dataclass(frozen=True)
class Notice:
    text: str
    level: str = "info"  # info, success, warning, error


@dataclass(frozen=True)
class Switched:
    """A handoff made its new session: the old session's tabs say so and go there (H14)."""

    new_session: ChatSession


@dataclass(frozen=True)
class ReviewOffered:
    """B14: the generated document, for the user to edit before the switch."""

    reply: Entry
    document: str  # as the model wrote it
    model: str = ""  # the model the new session will run on


@dataclass(frozen=True)
class Live:
    """The streaming reply as a whole (None: nothing streams): what a tab that arrives late
    or falls out of step is shown."""

    text: str | None
    purpose: str = ""  # "" (a reply), handoff, handoff_notes
    stage: str = ""  # which part of a handoff's notes
    thinking: str = ""


@dataclass(frozen=True)
class Delta:
    """More of the reply's open markdown block."""

    text: str


@dataclass(frozen=True)
class Thought:
    """More of the reply's thinking."""

    text: str


@dataclass(frozen=True)
class BlocksClosed:
    """Markdown blocks the reply just finished (`markdown`), and its open block's text so far."""

    markdown: str
    tail: str


@dataclass(frozen=True)
class EntryAdded:
    """An entry the generation stored (a reply, a prompt, a note)."""

    session: ChatSession
    entry: Entry
    streamed: bool = False  # it was streaming (a reply, notes): it takes the streaming one's place


@dataclass(frozen=True)
class ToolAnswered:
    """A tool call of `caller` got its result."""

    session: ChatSession
    caller: Entry
    result: Entry


@dataclass(frozen=True)
class ToolProgress:
    """A running call of reply `entry_id` (its `index`-th block) says how far it got."""

    entry_id: int
    index: int
    text: str


@dataclass(frozen=True)
class QuestionShown:
    """A tool call waits for the user's answer, or got it."""

    question: ToolQuestion


@dataclass(frozen=True)
class TitleChanged:
    session: ChatSession


@dataclass(frozen=True)
class SidebarChanged:
    """The owner's sessions changed (a title written, a session handed off to): every tab's
    sidebar, whatever session it shows. Rendering it reads the database."""

    owner_id: int


@dataclass(frozen=True)
class TranscriptShown:
    """The session moved to another branch: the whole transcript again (before entry `before`:
    a message about to be answered there). Rendering it reads the database."""

    session: ChatSession
    before: int | None = None


Event = (
    StatusShown
    | Notice
    | Switched
    | ReviewOffered
    | Live
    | Delta
    | Thought
    | BlocksClosed
    | EntryAdded
    | ToolAnswered
    | QuestionShown
    | ToolProgress
    | TitleChanged
    | SidebarChanged
    | TranscriptShown
)
Render = Callable[[Event], str]
