"""The app's models: a session's tree of entries, the prompts kept for it, each user's
preferences. Each room holds its model and the short methods about one of its rows."""

from .entry import Entry
from .preferences import Preferences
from .prompts import PendingPrompt, PromptTemplate
from .session import BranchRefused, ChatSession

__all__ = [
    "BranchRefused",
    "ChatSession",
    "Entry",
    "PendingPrompt",
    "Preferences",
    "PromptTemplate",
]
