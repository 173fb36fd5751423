"""The garbage collector as a long-running server wants it (asgi.py, and the benchmarks that
time the server's code in their own process, so they measure what the server runs)."""

from __future__ import annotations

import gc


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
    """
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
