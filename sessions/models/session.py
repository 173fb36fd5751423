"""A chat session: the reference agent's tree of entries in the database (each entry points at
its parent; `leaf` ends the current branch; `parent_session`, `handed_off_from` and
`forked_from` record where it came from), and the short methods about one session, in the
style of healthchecks' `Check`: append to its tree, move to another branch, fork, hand off,
change model or thinking level, rename, pin, archive and delete.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django import urls
from django.conf import settings
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from ..content import fork_title
from ..context import context_tokens
from ..statements import Update
from ..thinking import level_on
from ..tree import children, path_to, tip
from . import appending, building, refusals
from .entry import Entry
from .refusals import BranchRefused, SessionDeleted
from .wording import Wording

# The fields of a claim no generation holds.
UNCLAIMED: dict[str, Any] = {
    "generation_id": "",
    "generation_kind": "",
    "generation_channel": "",
    "generation_lease_until": None,
}


class ChatSession(Wording, models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    leaf = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    parent_session = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children"
    )
    handed_off_from = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # A fork (the reference agent's /branch): the entry of another session it was copied up to.
    forked_from = models.ForeignKey(
        "Entry", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The first session of this session's chain of handoffs (empty: this one is the first).
    chain_root = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The session it was last handed off to (set by the switch, so the status line says where
    # the work went on without a query).
    continued_in = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Which part of its chain this session is: 1 for a first session, its parent's plus one for
    # one handed off (set when it is created, so showing it costs no query).
    part = models.PositiveIntegerField(default=1)
    # The context's size as the reference agent estimates it: the last reply's reported usage
    # plus an estimate of what came after it (kept up to date by the store).
    context_tokens = models.PositiveIntegerField(default=0)
    draft_at = models.BigIntegerField(null=True, blank=True)  # the leaf of its handoff draft
    compacted_at = models.BigIntegerField(null=True, blank=True)  # its latest /compact's entry
    # An imported session: the model its file ran on ("provider/model"), its working folder.
    imported_model = models.CharField(max_length=200, blank=True)
    cwd = models.CharField(max_length=500, blank=True)
    # How much Claude thinks before replying (sessions.thinking): the latest
    # thinking_level_change on the branch.
    thinking_level = models.CharField(max_length=16, default="off")
    # Session care: pinned to the top of the list; archived (out of the list, still found by
    # search); deleted (out of sight, restorable until AGENTWEB_UNDO_DELETE_SECONDS pass).
    pinned = models.BooleanField(default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Being filled in short transactions (a large fork, see `building`): out of sight until
    # its last entry is in.
    building = models.BooleanField(default=False)
    instructions = models.TextField(blank=True)  # its own (/instructions), after its owner's
    # The reply streaming now, saved every few seconds: what a crash would otherwise lose.
    partial_text = models.TextField(blank=True)
    partial_purpose = models.CharField(max_length=32, blank=True)
    partial_model = models.CharField(max_length=100, blank=True)

    # The claim of the one generation allowed per session (SPEC B8, B12).
    generation_id = models.CharField(max_length=40, blank=True)
    generation_kind = models.CharField(max_length=16, blank=True)
    generation_channel = models.CharField(max_length=200, blank=True)
    generation_started_at = models.DateTimeField(null=True, blank=True)
    generation_lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"]),
            models.Index(fields=["owner", "chain_root"]),
            # The owner's sessions that hold a claim (few), without reading the rest: the cap
            # on generations at once is read at every prompt.
            models.Index(fields=["owner", "generation_id"]),
        ]
        constraints = [
            # One handoff document starts at most one session, however many tabs confirm it.
            models.UniqueConstraint(
                fields=["handed_off_from"],
                condition=Q(handed_off_from__isnull=False),
                name="one_session_per_handoff_document",
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Session {self.pk}"

    def get_absolute_url(self) -> str:
        return urls.reverse("chat:session", args=[self.pk])

    def url_at(self, entry_id: int) -> str:
        """The session's page, opened at entry `entry_id` (however old), scrolled to it."""
        return f"{self.get_absolute_url()}?at={entry_id}#entry-{entry_id}"

    @property
    def chain_id(self) -> int:
        return self.chain_root_id or self.pk

    @property
    def display_title(self) -> str:
        return self.title or "Untitled session"

    @property
    def is_generating(self) -> bool:
        """A live claim: some process is generating and renewing its lease."""
        return (
            bool(self.generation_id)
            and self.generation_lease_until is not None
            and (self.generation_lease_until > timezone.now())
        )

    @property
    def was_interrupted(self) -> bool:
        """A claim whose process stopped renewing it: that generation died with its process."""
        return bool(self.generation_id) and not self.is_generating

    @staticmethod
    def kept() -> Q:
        """Not deleted (nor still being built): the sessions a person sees, opens and finds."""
        return Q(deleted_at__isnull=True, building=False)

    @staticmethod
    def in_chains(chain_ids: Iterable[int]) -> Q:
        """The sessions of these chains (a chain's id is its first session's)."""
        ids = list(chain_ids)
        return Q(chain_root_id__in=ids) | Q(chain_root__isnull=True, pk__in=ids)

    @staticmethod
    def claimable(now: datetime | None = None) -> Q:
        return Q(generation_id="") | Q(generation_lease_until__lt=now or timezone.now())

    @staticmethod
    def lease_until(now: datetime | None = None) -> Any:
        return (now or timezone.now()) + timedelta(seconds=settings.AGENTWEB_GENERATION_LEASE)

    # --- its tree ---------------------------------------------------------------------------
    def parents(self) -> dict[int, int | None]:
        """Each entry's parent, by id: the tree's shape in one small query."""
        return dict(Entry.objects.filter(session_id=self.pk).values_list("id", "parent_id"))

    def append(self, **fields: Any) -> Entry:
        """An entry under the leaf, made the leaf, atomically.

        The session's context size follows, as the reference agent estimates it: a reply
        that reports its usage sets it; anything else that reaches the model adds its estimate.
        """
        return appending.sending(self, **fields)()

    def append_message(self, role: str, content: list[dict[str, Any]], **fields: Any) -> Entry:
        """A message (its other columns in `fields`); the first user message titles the session."""
        return appending.sending_message(self, role, content, **fields)()

    def append_custom_message(
        self,
        custom_type: str,
        content: str | list[dict[str, Any]],
        *,
        display: bool = True,
        data: dict[str, Any] | None = None,
    ) -> Entry:
        """A `custom_message`: it reaches the model as a user message."""
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return self.append(
            kind=Entry.Kind.CUSTOM_MESSAGE,
            custom_type=custom_type,
            content=content,
            display=display,
            data=data or {},
        )

    def append_custom(self, custom_type: str, text: str, **fields: Any) -> Entry:
        """A `custom` entry: shown in the transcript, never sent to the model (`fields`: its
        data, status and error)."""
        content = [{"type": "text", "text": text}]
        return self.append(
            kind=Entry.Kind.CUSTOM, custom_type=custom_type, content=content, **fields
        )

    def save_partial(self, text: str, purpose: str, model: str) -> None:
        """Keep the reply streaming now (any append clears it): what a crash would lose."""
        PARTIAL_SAVED.execute(session_id=self.pk, text=text, purpose=purpose, model=model)

    def move_leaf(self, leaf_id: int | None, *, generation_id: str = "") -> None:
        """Point the session at another branch (None: before its first entry), with the context
        size and thinking level of that branch; refused (BranchRefused) while a generation
        runs, unless it is the caller's own (`generation_id`: an edit or a regeneration about
        to reply)."""
        mine = Q(generation_id=generation_id) if generation_id else Q(pk__in=[])
        with transaction.atomic():
            path = path_to(leaf_id, self.parents()) if leaf_id is not None else []
            branch = Entry.in_order(path)
            size, level = context_tokens(branch), level_on(branch)
            moved = ChatSession.objects.filter(ChatSession.claimable() | mine, pk=self.pk).update(
                leaf_id=leaf_id,
                context_tokens=size,
                thinking_level=level,
                updated_at=timezone.now(),
            )
            if not moved:
                raise BranchRefused(refusals.BUSY_BRANCHING)
        self.leaf_id, self.context_tokens, self.thinking_level = leaf_id, size, level

    def switch_branch(self, entry_id: int) -> int:
        """Make the branch through entry `entry_id` the session's own: the leaf moves to the
        newest entry under it. Returns the new leaf. Refused (BranchRefused) while a generation
        runs."""
        with transaction.atomic():
            parents = self.parents()
            if entry_id not in parents:
                raise BranchRefused(refusals.NOT_AN_ENTRY)
            newest = tip(entry_id, children(parents))
            self.move_leaf(newest)
        return newest

    def fork(self, entry_id: int, owner_id: int | None = None) -> ChatSession:
        """A new session holding the branch from the root to entry `entry_id` (the reference
        agent's /branch): copies of those entries, its lineage kept in `forked_from` (for
        another `owner`, a shared link's viewer, none). A long branch is copied in short
        transactions (`building`): no other user waits on it."""
        owner_id = owner_id or self.owner_id
        path = path_to(entry_id, self.parents())
        if entry_id not in path:
            raise BranchRefused(refusals.NOT_AN_ENTRY)
        most = settings.AGENTWEB_MAX_FORK_ENTRIES
        if len(path) > most:
            raise BranchRefused(
                f"A fork holds at most {most:,} entries; this branch has {len(path):,}."
            )
        mine = ChatSession.objects.filter(owner_id=owner_id, building=True)
        if mine.exclude(building.abandoned()).exists():
            raise BranchRefused(refusals.FORK_UNDER_WAY)
        originals = Entry.in_order(path)
        new = ChatSession.objects.create(
            owner_id=owner_id,
            model=self.model,
            title=fork_title(self.title),
            forked_from_id=entry_id if owner_id == self.owner_id else None,
            imported_model=self.imported_model,
            cwd=self.cwd,
            context_tokens=context_tokens(originals),
            thinking_level=level_on(originals),
            instructions=self.instructions,
            building=True,
            generation_lease_until=building.lease(),
        )
        try:
            copies = building.copy_entries(originals, new.pk, new.renew_building)
        except BaseException:
            building.delete_entries(new.pk)
            new.delete()
            raise
        leaf_id = copies[-1].pk if copies else None
        ChatSession.objects.filter(pk=new.pk).update(leaf_id=leaf_id, building=False)
        new.refresh_from_db()
        return new

    def renew_building(self) -> None:
        """Renew the lease of this session's building (a fork, an import), which says its
        process is still at it (`building`)."""
        ChatSession.objects.filter(pk=self.pk, building=True).update(
            generation_lease_until=building.lease()
        )

    def hand_off(
        self,
        *,
        from_entry: Entry,
        seed: Sequence[dict[str, Any]],
        generation_id: str = "",
        model: str = "",
    ) -> ChatSession:
        """The session this one continues in (on `model`, else this one's), in one transaction
        (SPEC B6): its lineage, its seed entries (`seed`: each one's fields, the handoff message
        first) and the prompts still queued here (B10). A running generation's claim moves too."""
        with transaction.atomic():
            if not ChatSession.objects.select_for_update().filter(self.kept(), pk=self.pk):
                raise SessionDeleted(refusals.DELETED_DURING_HANDOFF)
            new = ChatSession.objects.create(
                owner_id=self.owner_id,
                model=model or self.model,
                title=self.title,
                thinking_level=self.thinking_level,
                instructions=self.instructions,  # carried into the session it continues in
                parent_session=self,
                handed_off_from=from_entry,
                chain_root_id=self.chain_id,
                part=self.part + 1,
            )
            for fields in seed:
                new.append(**fields)
            self.pending_prompts.update(session=new)
            ChatSession.objects.filter(pk=self.pk).update(continued_in=new)
            if generation_id:
                self._move_claim(new, generation_id)
        self.continued_in = new
        return new

    def _move_claim(self, new: ChatSession, generation_id: str) -> None:
        moved = ("generation_kind", "generation_channel", "generation_started_at")
        claim = ChatSession.objects.filter(pk=self.pk).values(*moved, "generation_lease_until")[0]
        ChatSession.objects.filter(pk=new.pk).update(generation_id=generation_id, **claim)
        ChatSession.objects.filter(pk=self.pk, generation_id=generation_id).update(**UNCLAIMED)

    # --- what it runs on --------------------------------------------------------------------
    def change_model(self, model: str) -> Entry:
        """Run the session on another model from now on, recorded as the reference agent does."""
        provider = "agentweb" if model == "local" else "anthropic"
        fields = {"provider": provider, "modelId": model}
        return self._change(Entry.Kind.MODEL_CHANGE, fields, model=model)

    def change_thinking(self, level: str) -> Entry:
        """Think at another level from now on, recorded as the reference agent does."""
        fields = {"thinkingLevel": level}
        return self._change(Entry.Kind.THINKING_LEVEL_CHANGE, fields, thinking_level=level)

    def _change(self, kind: str, fields: dict[str, Any], **column: str) -> Entry:
        with transaction.atomic():
            entry = self.append(kind=kind, data={"fields": fields})
            ChatSession.objects.filter(pk=self.pk).update(**column)
        for name, value in column.items():
            setattr(self, name, value)
        return entry

    # --- care -------------------------------------------------------------------------------
    def set_pinned(self, pinned: bool) -> None:
        self.pinned = pinned
        ChatSession.objects.filter(pk=self.pk).update(pinned=pinned)

    def set_archived(self, archived: bool) -> None:
        """Archived sessions leave the list (search still finds them); unarchived, they return."""
        self.archived_at = timezone.now() if archived else None
        ChatSession.objects.filter(pk=self.pk).update(archived_at=self.archived_at)

    def soft_delete(self, *, whole_chain: bool = False) -> list[int]:
        """Delete the session (or every session of its chain), restorable for a while (see
        `sessions.care`); the ids deleted."""
        kept = ChatSession.objects.filter(ChatSession.kept(), owner_id=self.owner_id)
        chosen = kept.filter(self.in_chains([self.chain_id]) if whole_chain else Q(pk=self.pk))
        with transaction.atomic():
            ids = list(chosen.select_for_update().values_list("pk", flat=True))
            ChatSession.objects.filter(pk__in=ids).update(deleted_at=timezone.now())
        return ids


# A streaming reply's save, every few seconds of every stream (`save_partial`): compiled once
# per connection, where the ORM's `update` built its SQL again at each save.
PARTIAL_SAVED: Update[ChatSession] = Update(
    lambda session_id, text, purpose, model: (
        ChatSession.objects.filter(pk=session_id),
        {"partial_text": text, "partial_purpose": purpose, "partial_model": model},
    ),
    session_id=int,
    text=str,
    purpose=str,
    model=str,
)
