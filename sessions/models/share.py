"""A read-only link to a snapshot of a session, or of its whole chain of handed-off sessions."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone


def new_token() -> str:
    return secrets.token_urlsafe(24)  # 192 bits: unguessable


class ShareLink(models.Model):
    """What a link shares: `parts`, the sessions in chain order, each as of the leaf it had when
    the link was made (`[[session id, leaf id], …]`: later turns are not shared). Revoked, it
    answers 404; its views are counted for the owner's list."""

    token = models.CharField(max_length=64, unique=True, default=new_token)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    session = models.ForeignKey("ChatSession", on_delete=models.CASCADE, related_name="shares")
    chain = models.BooleanField(default=False)  # the whole chain, not the session alone
    parts = models.JSONField(default=list)
    files = models.JSONField(default=list)  # the ids of the files its messages show
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)
    views = models.PositiveIntegerField(default=0)
    last_viewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"share of {self.session_id}"

    @classmethod
    def active(cls) -> models.Q:
        return models.Q(revoked_at__isnull=True)
