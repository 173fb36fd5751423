"""Side by side (SPEC B5): two sessions of one chain in two columns, with what the handoff
document carried."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.cache import cache
from django.http import HttpResponse
from django.shortcuts import redirect, render

from .. import coverage, handoff, listing, store, transcript
from ..forms import CompareForm
from ..models import ChatSession, Entry
from .base import AuthenticatedRequest, own_session


def compare(request: AuthenticatedRequest, session_id: int, other_id: int) -> HttpResponse:
    """Two sessions of one chain side by side, the older on the left (SPEC B5)."""
    first, second = own_session(request, session_id), own_session(request, other_id)
    old, new = sorted([first, second], key=lambda s: (s.created_at, s.pk))
    chain = listing.chain_of(old)
    old_outline, new_outline = store.branch_outline(old), store.branch_outline(new)
    opening = Entry.in_order([pk for pk, _ in new_outline[:1]])
    seed = opening[0] if opening and opening[0].is_handoff else None
    document_entry_id = listing.handed_off_from(old, new, chain)
    report = _coverage_report(old, seed) if seed is not None else None
    busy = report if isinstance(report, str) else ""
    return render(
        request,
        "sessions/compare.html",
        {
            "old": old,
            "new": new,
            "columns": [
                _column("old", old, old_outline, document_entry_id),
                _column("new", new, new_outline, seed.pk if seed else None),
            ],
            "chain": chain,
            "same_chain": old.chain_id == new.chain_id,
            "coverage": None if busy else report,
            "coverage_busy": busy,
        },
    )


AFTER_FOCUS = 20  # entries shown after the one a compare column is about


def _column(
    side: str, session: ChatSession, outline: list[tuple[int, str]], focus: int | None
) -> dict[str, Any]:
    """One column of side by side: a window of the transcript around its focus (the handoff
    document, or the seed), with the earlier entries on demand and a link for the later ones.
    Only the window's entries are loaded."""
    size = len(outline)
    at = next((i for i, (pk, _) in enumerate(outline) if pk == focus), size - 1)
    start = max(0, min(at - (transcript.WINDOW - AFTER_FOCUS), size - transcript.WINDOW))
    start = transcript.start_of_window([role for _, role in outline], start)
    end = min(size, start + transcript.WINDOW, max(at + AFTER_FOCUS + 1, transcript.WINDOW))
    shown = Entry.in_order([pk for pk, _ in outline[start:end]])
    return {
        "side": side,
        "session": session,
        "entries": transcript.fold(shown),
        "focus": focus,
        "earlier": start,
        "earlier_before": shown[0].pk if shown else 0,
        "later": size - end,
    }


def _coverage_report(old: ChatSession, seed: Entry) -> coverage.Coverage | str:
    """The coverage report, computed once per old branch and seed (the only time the whole old
    branch is loaded): a request that finds another computing it says so instead of repeating
    the work."""
    key = f"coverage:{old.pk}:{old.leaf_id}:{seed.pk}"
    report: coverage.Coverage | None = cache.get(key)
    if report is not None:
        return report
    if not cache.add(f"{key}:busy", True, timeout=300):
        return "The coverage of this handoff is being worked out: reload in a moment."
    try:
        report = coverage.coverage(store.branch_rows(old), handoff.unwrap(seed.text), old.cwd)
        cache.set(key, report, timeout=3600)
    finally:
        cache.delete(f"{key}:busy")
    return report


def compare_choice(request: AuthenticatedRequest) -> HttpResponse:
    """The chooser's GET form: any two sessions of a chain."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        messages.error(request, "Choose two sessions to compare.")
        return redirect("chat:index")
    return redirect("chat:compare", form.cleaned_data["left"], form.cleaned_data["right"])
