"""Thin views: look up the user's own session, hand the template what it shows, or do what
was asked through the session's own methods and show the change in every tab."""

from .account import PasswordChange, sign_out_others
from .actions import (
    care_for,
    change_model,
    change_thinking,
    edit_todos,
    fork,
    instructions,
    rename,
    restore,
    switch_branch,
)
from .compare import compare, compare_choice
from .files import attach, attachment
from .pages import (
    earlier_entries,
    entry_markdown,
    export,
    import_session,
    index,
    lineage_map,
    new_session,
    preferences,
    session_page,
    tree,
)
from .prompts import delete_prompt, edit_prompt, prompts
from .sharing import continue_shared, revoke_link, share, shared, shared_file
from .tools import choose_tools, tools

__all__ = [
    "PasswordChange",
    "attach",
    "attachment",
    "care_for",
    "change_model",
    "change_thinking",
    "choose_tools",
    "compare",
    "compare_choice",
    "continue_shared",
    "delete_prompt",
    "earlier_entries",
    "edit_prompt",
    "edit_todos",
    "entry_markdown",
    "export",
    "fork",
    "import_session",
    "index",
    "instructions",
    "lineage_map",
    "new_session",
    "preferences",
    "prompts",
    "rename",
    "restore",
    "revoke_link",
    "session_page",
    "share",
    "shared",
    "shared_file",
    "sign_out_others",
    "switch_branch",
    "tools",
    "tree",
]
