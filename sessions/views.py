"""Thin views: look up the user's own session, hand the template what it shows."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from . import commands, partials, runtime, store
from .forms import PreferencesForm
from .models import ChatSession, Preferences


class AuthenticatedRequest(HttpRequest):
    """Every view here sits behind LoginRequiredMiddleware."""

    user: User


def _own_session(request: AuthenticatedRequest, session_id: int) -> ChatSession:
    return get_object_or_404(
        ChatSession.objects.select_related("parent_session"), pk=session_id, owner=request.user
    )


def index(request: AuthenticatedRequest) -> HttpResponse:
    sessions = ChatSession.objects.filter(owner=request.user).order_by("-updated_at")[:200]
    return render(
        request,
        "sessions/index.html",
        {"sessions": sessions, "default_model": settings.AGENTWEB_MODEL},
    )


@require_POST
def new_session(request: AuthenticatedRequest) -> HttpResponse:
    session = store.new_session(request.user, model=settings.AGENTWEB_MODEL)
    return redirect(session)


def session_page(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    session = _own_session(request, session_id)
    entries = store.get_branch(session)
    after = entries[-1].pk if entries else 0
    context = {
        **partials.status_context(session, **runtime.status_state(session)),
        "entries": entries,
        "children": list(session.children.order_by("created_at")),
        "commands": commands.REGISTRY.values(),
        "ws_url": f"/ws/sessions/{session.pk}/?after={after}",
        "live_text": None,
    }
    return render(request, "sessions/session.html", context)


def compare(request: AuthenticatedRequest, session_id: int, other_id: int) -> HttpResponse:
    """Two sessions side by side, older on the left (SPEC B5)."""
    first, second = _own_session(request, session_id), _own_session(request, other_id)
    left, right = sorted([first, second], key=lambda s: (s.created_at, s.pk))
    columns = [(s, store.get_branch(s)) for s in (left, right)]
    return render(request, "sessions/compare.html", {"columns": columns})


def preferences(request: AuthenticatedRequest) -> HttpResponse:
    prefs, _ = Preferences.objects.get_or_create(user=request.user)
    form = PreferencesForm(request.POST or None, instance=prefs)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Preferences saved.")
        return redirect("chat:preferences")
    return render(request, "sessions/preferences.html", {"form": form})
