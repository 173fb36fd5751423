"""Profiles for the benchmarks' --profile runs: py-spy on a server process, and Chromium's own
accounting of a page's main thread (the DevTools protocol's Performance metrics and its JS
sampling profiler). Each prints the top lines that docs/PERFORMANCE.md quotes.

py-spy is not a dependency: `.venv/bin/pip install py-spy` before a --profile run.
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Chromium's main-thread time, by kind (seconds, cumulative since the page opened).
METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    return found


def _record(pid: int, out: Path, *more: str) -> subprocess.Popen[bytes]:
    """py-spy recording every thread of `pid` at 250 Hz into `out` (raw, collapsed stacks)."""
    return subprocess.Popen(
        [_py_spy(), "record", "--pid", str(pid), "--rate", "250", "--format", "raw",
         "--output", str(out), "--threads", "--nonblocking", *more],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


@contextmanager
def py_spy(pid: int, top: int = 15) -> Iterator[None]:
    """Sample the process `pid` (every thread, with the GIL holder marked) while the block
    runs; then print its functions by own time, and the share of samples that held the GIL."""
    out = Path(tempfile.mkdtemp()) / "profile.txt"
    recorder = _record(pid, out)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    print_py_spy(out.read_text(), top)
    print(f"    the stacks, collapsed: {out}")


class PySpyFor:
    """py-spy on the process `pid` for `seconds` from `start()` (the set-up of a burst of
    prompts, say); `report()` waits for it and prints what `py_spy` prints."""

    def __init__(self, pid: int, seconds: int, top: int = 15) -> None:
        self.pid, self.seconds, self.top = pid, seconds, top
        self.out = Path(tempfile.mkdtemp()) / "profile.txt"
        self.recorder: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.recorder = _record(self.pid, self.out, "--duration", str(self.seconds))

    def report(self) -> None:
        if self.recorder is not None:
            self.recorder.wait(60)
            print_py_spy(self.out.read_text(), self.top)
            print(f"    the stacks, collapsed: {self.out}")


def print_py_spy(collapsed: str, top: int) -> None:
    own: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        samples = int(count)
        total += samples
        threads[frames[0]] += samples
        own[_short(frames[-1])] += samples
        for package in {_package(frame) for frame in frames[1:]} - {""}:
            packages[package] += samples
    print(f"    py-spy: {total} samples at 250 Hz, by thread:")
    for thread, samples in threads.most_common(4):
        print(f"      {samples / total:6.1%}  {thread}")
    print("    by package (time in it or in what it calls):")
    for package, samples in packages.most_common(top):
        print(f"      {samples / total:6.1%}  {package}")
    print("    by function (own time):")
    for frame, samples in own.most_common(top):
        print(f"      {samples / total:6.1%}  {frame}")


def _package(frame: str) -> str:
    """The package a frame's code is in (`anthropic`, `channels_redis`, `sessions`, `asyncio`…):
    py-spy names files by their path under sys.path."""
    where = frame.partition(" (")[2].rpartition(":")[0]
    return where.split("/", 1)[0].removesuffix(".py") if where else ""


def _short(frame: str) -> str:
    """`name (/long/path/site-packages/pkg/mod.py:12)` → `name (pkg/mod.py:12)`."""
    name, _, where = frame.partition(" (")
    parts = where.rstrip(")").split("/")
    return f"{name} ({'/'.join(parts[-2:])})" if where else name


@contextmanager
def chromium(page: Any, top: int = 12) -> Iterator[None]:
    """Chromium's account of the page's main thread while the block runs: task, script,
    layout and style time, and the JS functions by own time."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    before = _metrics(cdp)
    cdp.send("Profiler.start")
    try:
        yield
    finally:
        profile = cdp.send("Profiler.stop")["profile"]
        after = _metrics(cdp)
        cdp.detach()
    print("    Chromium main thread:", ", ".join(
        f"{name.removesuffix('Duration').lower()} {(after[name] - before[name]) * 1000:.0f} ms"
        for name in METRICS
    ))  # fmt: skip
    print_js_profile(profile, top)


def _metrics(cdp: Any) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def print_js_profile(profile: dict[str, Any], top: int) -> None:
    """Own time of each JS function, from the sampling profile's samples and time deltas."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    own: collections.Counter[str] = collections.Counter()
    for node_id, delta in zip(profile["samples"], profile["timeDeltas"], strict=False):
        frame = nodes[node_id]["callFrame"]
        url = frame["url"].rsplit("/", 1)[-1]
        name = frame["functionName"] or "(anonymous)"
        own[f"{name} ({url}:{frame['lineNumber'] + 1})" if url else name] += delta
    total = sum(own.values()) or 1
    print(f"    JS sampling profile, {total / 1000:.0f} ms, by function (own time):")
    for frame, micros in own.most_common(top):
        print(f"      {micros / total:6.1%}  {micros / 1000:7.1f} ms  {frame}")
