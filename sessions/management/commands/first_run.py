"""Tell the person starting agentweb how to sign in; on a fresh database, make them an account."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from foundation.private import create_private
from sessions.providers import catalog

CREDENTIALS = Path(settings.BASE_DIR) / ".agentweb-credentials"


class Command(BaseCommand):
    help = "Create a first account when there is none, and print how to sign in."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, *args: Any, url: str, **options: Any) -> None:
        User = get_user_model()
        login = f"{url.rstrip('/')}/accounts/login/"
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "", password)
            create_private(CREDENTIALS, f"admin\n{password}\n")
            self.stdout.write(  # the only time the password is printed
                f"\n  agentweb is starting at {url}\n"
                f"  Sign in at {login} as username 'admin' with password '{password}'\n"
                f"  (kept in {CREDENTIALS.name}, readable by you only; delete it once noted).\n"
            )
        elif CREDENTIALS.exists():
            self.stdout.write(
                f"\n  agentweb is starting at {url}\n"
                f"  Sign in at {login} as 'admin': its password is in {CREDENTIALS.name}.\n"
            )
        else:
            self.stdout.write(
                f"\n  agentweb is starting at {url}\n  Sign in at {login}. To make an account: "
                ".venv/bin/python manage.py createsuperuser\n"
            )
        model = catalog.default_model()
        source = (
            "Claude" if model != "local" else "the offline model (set ANTHROPIC_API_KEY for Claude)"
        )
        self.stdout.write(f"  New sessions use {source}: {model}\n\n")
