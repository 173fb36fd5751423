"""daphne under cProfile, switched on and off by signals: `bench/load.py --cprofile FILE` runs
the server this way and profiles the burst of prompts alone (SIGUSR1 when the prompts go,
SIGUSR2 once every one has reached the model). The event loop's thread and the one database
thread each get a profile: FILE and FILE.db (pstats files).

    .venv/bin/python -m pstats /tmp/burst.prof
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from typing import Any

OUT = os.environ["AGENTWEB_CPROFILE"]
loop_profile = cProfile.Profile()
thread_profile = cProfile.Profile()


def _on_the_thread(call: Any) -> None:
    from asgiref.sync import SyncToAsync

    SyncToAsync.single_thread_executor.submit(call)


def start(*_: Any) -> None:
    _on_the_thread(thread_profile.enable)
    loop_profile.enable()


def stop(*_: Any) -> None:
    loop_profile.disable()
    loop_profile.dump_stats(OUT)

    def stop_thread() -> None:
        thread_profile.disable()
        thread_profile.dump_stats(OUT + ".db")

    _on_the_thread(stop_thread)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from daphne.cli import CommandLineInterface

    sys.argv[0] = "daphne"
    CommandLineInterface.entrypoint()
