"""Files attached to messages: taken from the composer, and given back to their owner only."""

from __future__ import annotations

from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from .. import attachments, partials
from ..models import Attachment, Refused
from .base import AuthenticatedRequest, own_session


@require_POST
def attach(request: AuthenticatedRequest, session_id: int) -> HttpResponse:
    """One file from the composer (Attach, paste or drop): its chip, to go with the next
    message; or why it was refused (400), said in words."""
    session = own_session(request, session_id)
    upload = request.FILES.get("file")
    if upload is None:
        return HttpResponse(partials.notice("Choose a file to attach.", "error"), status=400)
    try:
        attachment = attachments.take(session.owner_id, session.pk, upload)
    except Refused as refused:
        return HttpResponse(partials.notice(str(refused), "error"), status=400)
    chip = render(request, "sessions/session.html#attached", {"attachment": attachment})
    chip.status_code = 201
    return chip


def attachment(request: AuthenticatedRequest, attachment_id: int, name: str) -> FileResponse:
    """An attached file, for its owner."""
    return served(get_object_or_404(Attachment, pk=attachment_id, owner=request.user))


def served(kept: Attachment) -> FileResponse:
    """A file as it is given back: an image shown as one; anything else only downloaded (never
    shown by the browser as a page: an SVG's script, an HTML file's, never runs)."""
    try:
        opened = attachments.storage().open(kept.path, "rb")
    except OSError:
        raise Http404("The file is no longer kept.") from None
    inline = kept.kind == Attachment.Kind.IMAGE
    response = FileResponse(
        opened,
        as_attachment=not inline,
        filename=kept.name,
        content_type=kept.media_type if inline else "application/octet-stream",
    )
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=86400"
    return response
