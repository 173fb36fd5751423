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
        after = self.request.session.session_key or ""
        tabs.recheck_sign_ins(form.user.pk, {before: after})
        return response
