"""What a session is called and what it is told: its title and its own instructions, each set
in one UPDATE of its row."""

from __future__ import annotations

from typing import Any

from . import refusals

INSTRUCTIONS_LIMIT = 8_000  # a session's own instructions, as its owner's are bounded


class Wording:
    """`ChatSession`'s title and instructions (a mixin of the model)."""

    pk: Any
    title: str
    instructions: str
    objects: Any
    _meta: Any

    def set_instructions(self, text: str) -> str:
        """The session's own instructions ("": none); returns why they were refused."""
        text, limit = text.strip(), INSTRUCTIONS_LIMIT
        if len(text) > limit:
            return f"Instructions are at most {limit:,} characters (these have {len(text):,})."
        self.instructions = text
        type(self).objects.filter(pk=self.pk).update(instructions=text)
        return ""

    def rename(self, title: str) -> str:
        """Give the session a title; returns why it was refused (empty: renamed)."""
        title, limit = title.strip(), type(self)._meta.get_field("title").max_length or 0
        if not title:
            return refusals.TITLE_REQUIRED
        if len(title) > limit:
            return f"Ensure this value has at most {limit} characters (it has {len(title)})."
        self.title = title
        type(self).objects.filter(pk=self.pk).update(title=title)
        return ""
