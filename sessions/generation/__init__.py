"""The generation engine: where a generation runs, one per session (SPEC B7, B8, B12).

* claims.py: the claim on a session (a conditional UPDATE with a lease) and its renewal;
* turns.py: what a job does next, and the prompt queue;
* going_on.py: Continue, for a reply stopped at its maximum length;
* job.py: one generation run, in the process that claimed the session;
* relay.py: the job's events to every tab, numbered and batched;
* events.py: what the engine tells the page, typed (never HTML);
* api.py: what the consumer calls (re-exported here).
"""

from .api import (
    answer,
    branch_and_reply,
    cancel,
    change_queued,
    confirm_handoff,
    go_on,
    on_entry,
    request_snapshot,
    start,
    start_handoff,
    start_if_queued,
    stop,
    stop_all,
    submit,
    wait_idle,
    watch,
)
from .claims import recover_interrupted

__all__ = [
    "branch_and_reply",
    "answer",
    "cancel",
    "change_queued",
    "confirm_handoff",
    "go_on",
    "on_entry",
    "recover_interrupted",
    "request_snapshot",
    "start",
    "start_handoff",
    "start_if_queued",
    "stop",
    "stop_all",
    "watch",
    "submit",
    "wait_idle",
]
