"""Share links: made and revoked by the owner (the session's Share dialog, Preferences), opened
by anyone who has one, and continued as a copy by a signed-in viewer."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from .. import sharing
from ..models import BranchRefused
from ..numbers import whole_number
from .base import AuthenticatedRequest, own_session
from .files import served


@require_POST
def share(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """Create link (a snapshot of the session, or with `chain` of its whole chain), or Revoke
    link (`revoke`: the link's id): the dialog as it is after."""
    session = own_session(request, session_id)
    if (link_id := whole_number(request.POST.get("revoke"))) is not None:
        sharing.revoke(request.user.pk, link_id)
    else:
        sharing.create(session, chain=request.POST.get("chain") == "on")
    if not request.htmx:  # the list's Share the chain: the session, its dialog open on the link
        return redirect(f"{session.get_absolute_url()}#share")
    context = {"session": session, "share": sharing.current(session)}
    return render(request, "sessions/session.html#share_body", context)


@require_POST
def revoke_link(request: AuthenticatedRequest, link_id: int) -> HttpResponse:
    """Revoke one of the owner's links from Preferences → Shared links."""
    if sharing.revoke(request.user.pk, link_id):
        messages.success(request, "Link revoked: it no longer opens.")
    return redirect("chat:preferences")


@login_not_required
def shared(request: HttpRequest, token: str) -> HttpResponse:
    """A shared session or chain, read-only, for anyone with the link (404 once revoked)."""
    link = sharing.opened(token)
    if link is None:
        raise Http404("No such link: it was revoked, or never was.")
    response = render(request, "sessions/shared.html", sharing.context(link))
    response["X-Robots-Tag"] = "noindex"
    response["Referrer-Policy"] = "no-referrer"  # the link is the key: never sent on
    return response


@login_not_required
def shared_file(request: HttpRequest, token: str, attachment_id: int, name: str) -> FileResponse:
    """A file one of the link's messages shows, for anyone with the link (no other file)."""
    link = sharing.in_force(token)
    kept = sharing.shared_file(link, attachment_id) if link is not None else None
    if kept is None:
        raise Http404("No such file here.")
    return served(kept)


@require_POST
def continue_shared(request: AuthenticatedRequest, token: str) -> HttpResponse:
    """Continue in my account: the shared conversation copied into a session of the viewer's."""
    link = sharing.opened(token)
    if link is None:
        raise Http404("No such link: it was revoked, or never was.")
    try:
        copy = sharing.copy_for(link, request.user.pk)
    except BranchRefused as refusal:
        messages.error(request, str(refusal))
        return redirect("chat:shared", token=token)
    messages.success(
        request, "A copy of the shared conversation: it goes on here, in your account."
    )
    return redirect(copy)
