"""What every view shares: the signed-in request, the user's own session, short answers."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django_htmx.middleware import HtmxDetails

from .. import partials
from ..models import ChatSession


class AuthenticatedRequest(HttpRequest):
    """Every view here sits behind LoginRequiredMiddleware (and django-htmx's middleware)."""

    user: User
    htmx: HtmxDetails


def own_session(request: AuthenticatedRequest, session_id: int) -> ChatSession:
    return get_object_or_404(
        ChatSession.objects.select_related("parent_session", "forked_from__session").filter(
            ChatSession.kept()
        ),
        pk=session_id,
        owner=request.user,
    )


def say_refused(request: AuthenticatedRequest, session: ChatSession, reason: str) -> HttpResponse:
    """A branch action that could not be done: said where the person is looking."""
    if request.htmx:
        return HttpResponse(partials.notice(reason, "error"))  # swapped out of band
    messages.error(request, reason)
    return redirect(session)


def after_setting(request: AuthenticatedRequest, session: ChatSession) -> HttpResponse:
    """A picker's answer: nothing (every tab sees the change) or the error, in place."""
    if request.htmx:
        response = HttpResponse(status=204)
        for message in messages.get_messages(request):
            response = HttpResponse(partials.notice(str(message), "error"), status=200)
        return response
    return redirect(session)
