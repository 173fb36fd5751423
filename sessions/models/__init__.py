"""The app's models: a session's tree of entries, the prompts kept for it, each user's
preferences, the lines of an imported file. Each room holds its model and the short methods
about one of its rows."""

from .attachment import Attachment
from .drafts import HandoffDraft
from .entry import Entry
from .file_line import FileLine
from .preferences import Preferences
from .prompts import PendingPrompt, PromptTemplate
from .questions import ToolQuestion
from .refusals import BranchRefused, Refused
from .session import ChatSession
from .share import ShareLink
from .tool_choices import ToolChoice

__all__ = [
    "Attachment",
    "BranchRefused",
    "ChatSession",
    "Entry",
    "FileLine",
    "HandoffDraft",
    "PendingPrompt",
    "Preferences",
    "PromptTemplate",
    "Refused",
    "ShareLink",
    "ToolChoice",
    "ToolQuestion",
]
