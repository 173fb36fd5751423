"""The account page (issue 56, item 8): the account's usage over the last 30 days, its password
changed in the site's own style, and its other sign-ins ended."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import PasswordChangeView
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse_lazy
from django.views.decorators.http import require_POST

from .. import sign_ins, tabs, usage
from .base import AuthenticatedRequest

USAGE_DAYS = 30


class PasswordChange(PasswordChangeView):
    """The account page, whose form is Django's password change; then every other sign-in of
    the user ends for its sockets too (Django's session verification ends it for pages). This
    sign-in goes on under the new key Django gives it."""

    template_name = "sessions/account.html"
    success_url = reverse_lazy("chat:account")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        used = usage.of_owner_since(int(self.request.user.pk or 0), USAGE_DAYS)
        return {**super().get_context_data(**kwargs), "used": used, "days": USAGE_DAYS}

    def form_valid(self, form: Any) -> HttpResponse:
        before = self.request.session.session_key or ""
        response = super().form_valid(form)
        # Django gave this sign-in a new key, whose row holds no sign-in until the session is
        # saved: the session middleware would save it only as the response leaves, after the
        # sockets' recheck, which would then find that row empty and (as Django's check does)
        # flush it, and the middleware's save would answer 400 and sign the user out.
        self.request.session.save()
        after = self.request.session.session_key or ""
        tabs.recheck_sign_ins(form.user.pk, {before: after})
        messages.success(self.request, "Password changed: your other sign-ins have ended.")
        return response


@require_POST
def sign_out_others(request: AuthenticatedRequest) -> HttpResponse:
    """Every other sign-in of the user ends (its pages and its sockets); this one goes on."""
    if settings.SESSION_ENGINE != sign_ins.DATABASE_SESSIONS:
        messages.error(request, "This server keeps sign-ins where agentweb cannot list them.")
        return redirect("chat:account")
    ended = sign_ins.end_others(request.user.pk, request.session.session_key or "")
    for key in ended:
        tabs.close_sockets_of(request.user.pk, key)
    count = len(ended)
    said = f"{count} other sign-in{'s' if count != 1 else ''}" if count else "No other sign-in"
    messages.success(request, f"{said} ended.")
    return redirect("chat:account")
