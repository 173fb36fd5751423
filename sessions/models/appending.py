"""The statements every append runs, for every message of every prompt (issue 21): the
session's leaf read under a lock, the entry's row, the session's row written after it, and
the title a first message gives, each compiled once (`sessions.statements`). The session
model is looked up by name: it imports this module."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.apps import apps
from django.db.models import F, QuerySet

from ..statements import Insert, Statement, Update
from .entry import Entry


def _sessions() -> QuerySet[Any, Any]:
    return apps.get_model("chat", "ChatSession").objects.all()


ENTRY = Insert(Entry)  # an entry's row, as `save(force_insert=True)` writes it

LEAF = Statement(
    lambda session_id: _sessions().select_for_update().filter(pk=session_id).values_list("leaf_id"),
    session_id=int,
)


def _appended(context: Any) -> Update[Any]:
    """The session row after an entry joined it: the entry is its leaf, its context `context`."""
    return Update(
        lambda session_id, leaf_id, now, tokens: (
            _sessions().filter(pk=session_id),
            {
                "leaf_id": leaf_id,
                "updated_at": now,
                "partial_text": "",
                "context_tokens": context(tokens),
            },
        ),
        session_id=int,
        leaf_id=int,
        now=datetime,
        tokens=int,
    )


REPORTED = _appended(lambda tokens: tokens)  # a reply's usage says the context's size
ADDED = _appended(lambda tokens: F("context_tokens") + tokens)  # anything else adds its estimate

TITLED = Update(  # a session's first message titles it, unless it has a title
    lambda session_id, title: (_sessions().filter(pk=session_id, title=""), {"title": title}),
    session_id=int,
    title=str,
)
