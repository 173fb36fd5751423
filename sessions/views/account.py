"""The account's own pages that agentweb adds to Django's."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import PasswordChangeView
from django.http import HttpResponse

from .. import tabs


class PasswordChange(PasswordChangeView):
    """Django's password change; then every other sign-in of the user ends for its sockets too
    (Django's session verification ends it for pages). This sign-in goes on under the new key
    Django gives it."""

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
        return response
