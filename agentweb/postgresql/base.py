"""Django's PostgreSQL backend with its health check made where it can find something.

With CONN_HEALTH_CHECKS, Django checks a kept connection (a `SELECT 1` round trip) before the
first statement of every request, and under the ASGI server every database call is a request
of its own: a prompt's frame check, its claim, its notes and tools each paid a round trip more,
which 200 prompts at once wait for before their first deltas (docs/PERFORMANCE.md).

The check is for a connection that sat idle while the server went away (a restart, an idle
timeout). A connection that sent a statement less than HEALTHY_FOR seconds ago is taken as it
is: should the server be gone all the same, its statement fails as it would have without the
check, and Django closes a connection whose call raised a database error, so the next call
connects afresh.
"""

from __future__ import annotations

import math
import time
from typing import Any

from django.db.backends.postgresql import base

HEALTHY_FOR = 1.0  # seconds since a connection's last statement in which it is not checked


class DatabaseWrapper(base.DatabaseWrapper):  # type: ignore[misc]  # Django's is untyped
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.used_at = -math.inf  # when this connection last made a cursor

    def close_if_health_check_failed(self) -> None:
        now = time.monotonic()
        if self.connection is not None and now - self.used_at < HEALTHY_FOR:
            self.health_check_done = True  # used a moment ago: as good as checked
        super().close_if_health_check_failed()
        self.used_at = now
