"""Memory a connected, idle tab costs a process, with the in-memory channel layer or Redis, and
where it goes (target 8 of docs/PERFORMANCE.md: < 100 KB a socket).

N session pages' WebSockets are opened in this process (Channels' in-process communicator, the
same consumer daphne runs), with tracemalloc on: it prints the RSS and the Python heap grown per
socket, and the heap's growth by file, largest first.

    .venv/bin/python bench/socket_memory.py --sockets 200 --layer redis
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_kb() -> int:
    """The process's resident set now, in KB (from /proc: ru_maxrss is a peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


async def measure(sockets: int, top: int) -> None:
    import harness

    user, cookie = await harness.signed_in_user()
    warm = [await harness.open_tab(user, cookie) for _ in range(5)]  # imports, pools, caches
    gc.collect()
    rss_before = rss_kb()
    tracemalloc.start(10)
    heap_before = tracemalloc.take_snapshot()
    tabs = [await harness.open_tab(user, cookie) for _ in range(sockets)]
    await asyncio.sleep(1)  # let the group joins and the channel readers settle
    gc.collect()
    heap_after = tracemalloc.take_snapshot()
    grown_rss = rss_kb() - rss_before
    stats = heap_after.compare_to(heap_before, "filename")
    grown_heap = sum(stat.size_diff for stat in stats)
    print(
        f"  {sockets} idle sockets: RSS +{grown_rss / sockets:.0f} KB a socket, "
        f"Python heap +{grown_heap / 1024 / sockets:.0f} KB a socket "
        "(target: < 100 KB a socket)"
    )
    print("  the heap's growth by file, largest first:")
    for stat in stats[:top]:
        where = "/".join(Path(stat.traceback[0].filename).parts[-2:])
        print(f"    {stat.size_diff / 1024 / sockets:7.1f} KB a socket  {where}")
    for tab in warm + tabs:
        await tab.disconnect()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sockets", type=int, default=200)
    parser.add_argument("--layer", choices=["memory", "redis"], default="memory")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    import harness

    with harness.on_layer(args.layer) as layer:
        print(f"{layer} channel layer, one process:")
        asyncio.run(measure(args.sockets, args.top))


if __name__ == "__main__":
    main()
