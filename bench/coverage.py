"""How fast is the coverage panel on a long session?

Builds a realistic 10,000-entry transcript in memory (paths, identifiers,
errors, numbers, decisions) and times, in one run, medians of:

  scan       reading every entry's text (the floor: what any check must do)
  extract    finding the concrete items
  coverage   extracting and checking each item against a handoff document

Run: .venv/bin/python bench/coverage.py --entries 10000 --runs 7
"""

from __future__ import annotations

import argparse

import harness
from harness import median_seconds

harness.setup()

from sessions.coverage import coverage  # noqa: E402
from sessions.items import extract  # noqa: E402
from sessions.models import Entry  # noqa: E402

LINES = [
    "Open src/app/module_{i}.py and fix handle_request_{i}() before the 3.{i} release.",
    "It fails with KeyError: 'field_{i}' when the payload is 1{i} MB; see https://example.org/issue/{i}",
    "We decided to keep retries at {i} because the API limits us to 50 req/s.",
    "The CacheStore.get_item_{i} path takes 2{i} ms; parseConfig and MAX_ITEMS_{i} stay.",
]


def transcript(size: int) -> list[Entry]:
    return [
        Entry(
            kind=Entry.Kind.MESSAGE,
            role="user" if n % 2 == 0 else "assistant",
            content=[
                {"type": "text", "text": LINES[n % 4].format(i=n % 500) + " Some prose. " * 8}
            ],
        )
        for n in range(size)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    entries = transcript(args.entries)
    document = "\n".join(LINES).format(i=7) * 3
    scan = median_seconds(lambda: sum(len(e.text) for e in entries), args.runs)
    found = median_seconds(lambda: extract(e.text for e in entries), args.runs)
    full = median_seconds(lambda: coverage(entries, document), args.runs)
    items = len(coverage(entries, document).items)
    print(f"{args.entries} entries, {items} items, {args.runs} runs each, medians:")
    for name, seconds in (("scan", scan), ("extract", found), ("coverage", full)):
        print(f"  {name:9} {seconds * 1000:8.1f} ms   x{seconds / scan:6.1f} of scan")


if __name__ == "__main__":
    main()
