"""What the relay costs a streamed delta: --streams relays (sessions/generation/relay.py), each
given a one-token delta --rate times a second, as a model's stream gives them, for --seconds;
each relay's batches go to its session's group on the channel layer, where one channel each (a
tab) reads them. The process's CPU, divided by the deltas given: the relay's batching, its
numbered messages and the layer's delivery, without the model's stream or the WebSocket.

    .venv/bin/python bench/relay_batches.py --streams 200 --rate 40 --seconds 3 --runs 3
    .venv/bin/python bench/relay_batches.py --layer redis   # the bus, on a Redis of its own
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def measure(streams: int, rate: float, seconds: float) -> tuple[float, int]:
    """The CPU a delta (µs) and the messages the tabs read, in one run."""
    from channels.layers import get_channel_layer

    from sessions import tabs
    from sessions.generation.relay import Relay

    layer = get_channel_layer()
    relays = [
        Relay(f"g{i}", lambda i=i: i, lambda event: f"<p>{event!r}</p>", lambda: streams)
        for i in range(1, streams + 1)
    ]
    channels = [await layer.new_channel() for _ in relays]
    for i, channel in enumerate(channels, start=1):
        await layer.group_add(tabs.session_group(i), channel)
    read = 0

    async def tab(channel: str) -> None:
        nonlocal read
        while True:
            await layer.receive(channel)
            read += 1

    readers = [asyncio.ensure_future(tab(channel)) for channel in channels]
    started = time.process_time()
    given = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for relay in relays:
            relay.on_delta("token ")
        given += streams
        await asyncio.sleep(1 / rate)
    for relay in relays:
        await relay.flush()
    await asyncio.sleep(0.1)  # the last batches read
    spent = time.process_time() - started
    for reader in readers:
        reader.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    await layer.flush()
    return spent / given * 1e6, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--rate", type=float, default=40.0, help="deltas a second, a stream")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--layer", choices=["memory", "redis"], default="memory")
    args = parser.parse_args()
    import harness

    with harness.on_layer(args.layer) as layer:
        runs = [
            asyncio.run(measure(args.streams, args.rate, args.seconds)) for _ in range(args.runs)
        ]
    print(
        f"{args.streams} relays, a delta each {1000 / args.rate:.0f} ms for {args.seconds:g} s, "
        f"{layer} channel layer, {args.runs} runs:"
    )
    for cost, read in runs:
        print(f"  CPU a delta {cost:5.1f} µs, {read:,} messages read")
    print(f"  median: CPU a delta {statistics.median(cost for cost, _ in runs):5.1f} µs")


if __name__ == "__main__":
    main()
