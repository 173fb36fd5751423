"""The fake Anthropic server in a process of its own, answering every request with the same
reply: N one-token text deltas, sent as fast as it can (or `--delay` seconds apart).

A benchmark that reads the stream in one process and serves it from another would otherwise
share one interpreter (and its lock) between the server and the reader being timed.

    .venv/bin/python bench/fake_server.py --tokens 20000   # prints the port, serves until killed
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fake_anthropic import FakeAnthropic, Reply

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    fake = FakeAnthropic()
    fake.responder = lambda body: Reply(
        chunks=[f"t{i} " for i in range(args.tokens)], delay=args.delay, within_max_tokens=False
    )
    fake.start()
    print(fake.port, flush=True)
    threading.Event().wait()


class FakeServerProcess:
    """bench/fake_server.py, started and stopped by a benchmark."""

    def __init__(self, tokens: int, delay: float = 0.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--tokens", str(tokens), "--delay", str(delay)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


if __name__ == "__main__":
    main()
