"""Prompts kept for later: one typed while a reply runs (queued), and a user's templates."""

from __future__ import annotations

import re
import shlex

from django.conf import settings
from django.db import models
from django.utils import timezone

from .refusals import Refused

CALL = re.compile(r"^/(?P<name>[a-z][a-z0-9_-]*)(?:\s+(?P<args>.*))?$", re.DOTALL)


# What a template's body says of the words after its name, as the reference agent expands it:
# $1 … $9 one word, $@ and $ARGUMENTS all of them, ${@:N} those from the N-th, ${@:N:L} L of them.
ARGUMENT = re.compile(r"\$\{@:(\d+)(?::(\d+))?\}|\$(\d)|\$@|\$ARGUMENTS")


def expand_arguments(body: str, args: str, limit: int | None = None) -> str:
    """`body` with its argument marks replaced by `args` (quoted words stay one word, their
    quotes read, for `$@` as for `$1` and `${@:N}`).

    With `limit`, text longer than that is never made: a body that repeats `$@` would
    otherwise multiply what was typed (a 99 KB message once became 49.5 million characters),
    so the expansion stops, refused, as soon as it passes the limit."""
    try:
        words = shlex.split(args)
    except ValueError:  # an unclosed quote: words as they are typed
        words = args.split()

    def value(mark: re.Match[str]) -> str:
        if mark[3]:
            at = int(mark[3]) - 1
            return words[at] if 0 <= at < len(words) else ""
        if mark[1]:
            start = max(int(mark[1]) - 1, 0)
            end = start + int(mark[2]) if mark[2] else None
            return " ".join(words[start:end])
        return " ".join(words)  # $@ as ${@:1}: quotes are read the same way by both

    parts: list[str] = []
    length, at = 0, 0
    for mark in ARGUMENT.finditer(body):
        parts += [body[at : mark.start()], value(mark)]
        length += len(parts[-2]) + len(parts[-1])
        at = mark.end()
        if limit is not None and length > limit:
            raise Refused(too_long(limit))
    parts.append(body[at:])
    if limit is not None and length + len(parts[-1]) > limit:
        raise Refused(too_long(limit))
    return "".join(parts)


def too_long(limit: int) -> str:
    return (
        f"That prompt fills in to more than {limit:,} characters, the longest message "
        "agentweb takes: shorten the words after its name."
    )


class PendingPrompt(models.Model):
    """A prompt typed while a generation runs: kept until the session's generation sends it.

    Queued in the database so nothing typed is lost to a reload, another
    process, or a handoff (SPEC B8, B10).
    """

    session = models.ForeignKey(
        "ChatSession", on_delete=models.CASCADE, related_name="pending_prompts"
    )
    text = models.TextField()
    attachments = models.JSONField(default=list, blank=True)  # the ids of its files
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text[:50]

    @classmethod
    def change(cls, session_id: int, pk: int, text: str | None) -> bool:
        """Queued prompt `pk` of the session given `text` (None: removed), unless the job took
        it first: whether it was still queued."""
        queued = cls.objects.filter(pk=pk, session_id=session_id)
        return bool(queued.delete()[0] if text is None else queued.update(text=text))


class PromptTemplate(models.Model):
    """A user's stored prompt: `/name args` in the chat box expands to `body`."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="prompt_templates"
    )
    name = models.SlugField(max_length=50)
    description = models.CharField(max_length=200, blank=True, default="")
    body = models.TextField(
        help_text="$1, $2 … are the words after the name, $@ (or $ARGUMENTS) all of them."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_template_name")
        ]

    def __str__(self) -> str:
        return f"/{self.name}"

    @classmethod
    def expand(cls, owner_id: int, text: str) -> str:
        """`/name args` becomes the owner's template `name`, with `$ARGUMENTS` replaced by args;
        `Refused` when that would be longer than the longest message agentweb takes."""
        match = CALL.match(text)
        if not match:
            return text
        template = cls.objects.filter(owner_id=owner_id, name=match["name"]).first()
        if template is None:
            return text
        args = (match["args"] or "").strip()
        return expand_arguments(template.body, args, settings.AGENTWEB_MAX_MESSAGE_CHARS)

    @classmethod
    def of(cls, owner_id: int) -> list[PromptTemplate]:
        """The owner's prompts, by name."""
        return list(cls.objects.filter(owner_id=owner_id).order_by("name"))

    @classmethod
    def names_of(cls, owner_id: int) -> frozenset[str]:
        return frozenset(cls.objects.filter(owner_id=owner_id).values_list("name", flat=True))
