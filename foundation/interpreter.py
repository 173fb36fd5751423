"""The interpreter as a long-running server wants it: its garbage collector and how soon a
thread gets the interpreter lock (asgi.py, and the benchmarks that time the server's code in
their own process, so they measure what the server runs)."""

from __future__ import annotations

import gc
import sys

# How long a thread that wants the interpreter lock waits for the one that holds it (Python's
# default: 5 ms). See `settle`.
SWITCH_INTERVAL = 0.0005


def settle() -> None:
    """Call once everything the process keeps is loaded.

    What is loaded by now lives as long as the process: full collections need not walk it
    again (they otherwise run through every module, model and template at each one, while a
    page of thousands of entries makes the objects that start them). Young collections run
    every 20,000 new objects, not 700: a burst of prompts makes objects fast, and with the
    default the process spent about 1.1 s of a 200-prompt load collecting (about 500
    collections, the oldest generation's 60–80 ms each), 0.1–0.2 s with this; reading a
    branch of 10,000 entries set off a full collection every other time (about 80 ms). The
    older generations keep their default cadence relative to it.

    A database call on a thread (the one thread of long calls; PostgreSQL's short calls too,
    on a pool, when this was measured) lets go of the lock at every round trip and must take
    it back from the busy event loop; with the default 5 ms, each statement's answer could
    wait that long, and a burst of prompts queued behind the waits. At 0.5 ms, 200 prompts at
    once on PostgreSQL and Redis, five pairs: first delta p95 median 2.32 → 1.99 s, gap p95
    median 232 → 170 ms (docs/PERFORMANCE.md). A process with one busy thread never switches:
    the interval only counts while another thread waits.
    """
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    sys.setswitchinterval(SWITCH_INTERVAL)
