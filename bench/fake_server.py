"""The fake Anthropic server in a process of its own, answering every request with the same
reply: N one-token text deltas, sent as fast as it can (or `--delay` seconds apart); with
`--rate`, the load's paced replies (`paced`), served by `paced_model`.

A benchmark that reads the stream in one process and serves it from another would otherwise
share one interpreter (and its lock) between the server and the reader being timed; the load's
model, too, answers from another machine than the tabs' browsers, not from their process.

    .venv/bin/python bench/fake_server.py --tokens 20000   # prints the port, serves until killed
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from tests.fake_anthropic import Reply

LONG_IF = "cancel me"  # a prompt whose paced reply streams until it is cancelled


def paced(tokens: int, rate: float) -> Callable[[dict[str, Any]], Reply]:
    """The load's replies: `token0 ` … `token<tokens - 1> `, `rate` a second; a prompt that
    says "cancel me" is answered a hundred times longer (it streams until it is cancelled)."""
    from tests.fake_anthropic import Reply

    def reply(body: dict[str, Any]) -> Reply:
        cancelled = LONG_IF in json.dumps(body.get("messages", [])[-1:])
        reply = Reply.slow(tokens=tokens * (100 if cancelled else 1), delay=1 / rate)
        return replace(reply, within_max_tokens=False)  # not cut to max_tokens: no need to count

    return reply


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fake_anthropic import FakeAnthropic, Reply

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--rate", type=float, default=0.0, help="the load's paced replies")
    parser.add_argument(
        "--report", action="store_true", help="with --rate: print requests and hang-ups"
    )
    args = parser.parse_args()
    if args.rate:  # the loads' model: the same replies, its bytes made once
        from paced_model import serve

        serve(paced(args.tokens, args.rate), reported=args.report)
        return
    fake = FakeAnthropic()
    fake.responder = lambda body: Reply(
        chunks=[f"t{i} " for i in range(args.tokens)], delay=args.delay, within_max_tokens=False
    )  # fmt: skip
    fake.start()
    print(fake.port, flush=True)
    threading.Event().wait()


class FakeServerProcess:
    """bench/fake_server.py, started and stopped by a benchmark. With `report`, it mirrors
    what the load reads of the in-process fake (`tests.fake_anthropic.FakeAnthropic`):
    `requests` (each one's arrival and last message), `disconnects`, `disconnected_at` and
    `wait_for`, as the server's process reports them."""

    def __init__(
        self, tokens: int, delay: float = 0.0, *, rate: float = 0.0, report: bool = False
    ) -> None:
        options = ["--tokens", str(tokens), "--delay", str(delay), "--rate", str(rate)]
        self.process = subprocess.Popen(
            [sys.executable, __file__, *options, *(["--report"] if report else [])],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.requests: list[dict[str, Any]] = []
        self.disconnected_at: list[float] = []
        self._changed = threading.Condition()
        if report:
            threading.Thread(target=self._read_reports, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def disconnects(self) -> int:
        return len(self.disconnected_at)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def _read_reports(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = json.loads(line)
            with self._changed:
                if "disconnected_at" in found:
                    self.disconnected_at.append(found["disconnected_at"])
                else:
                    self.requests.append(found)
                self._changed.notify_all()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


if __name__ == "__main__":
    main()
