"""Show generations cut off by a stopped server as interrupted, never as an endless spinner."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from sessions.care import purge_abandoned
from sessions.generation import recover_interrupted


class Command(BaseCommand):
    help = (
        "Mark generations left running by a stopped single-process server as interrupted, and "
        "remove the forks and imports it left half made."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if count := recover_interrupted():
            self.stdout.write(f"  {count} generation(s) were interrupted by the last stop.")
        if count := purge_abandoned():
            self.stdout.write(f"  {count} fork(s) or import(s) left half made were removed.")
