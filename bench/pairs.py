"""A bench run in alternating pairs: the working tree against an earlier commit, in one sitting.

These machines are noisy (the same code's figures move by a quarter from one minute to the
next), so a change is judged by runs that alternate old and new, not by two runs an hour
apart. This checks `--base` out into a temporary worktree (sharing this checkout's `.venv`:
each bench puts its own tree's root first on the path, so it measures that tree's code), runs
the command there and here in turn, `--runs` times each, and prints each run's figures, then
every figure's median for both, line by line: a line's numbers are matched by their place
among the line's words, so any bench's output can be compared.

Run: .venv/bin/python bench/pairs.py --base e258b06 --runs 3 -- bench/load.py --sessions 200
     (environment variables such as BENCH_DATABASE_URL reach both; --grep picks the lines)
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")  # 1,234.5 too
LINES = r"\d"  # by default every line with a figure
Shape = tuple[tuple[str, ...], int]  # a line's words around its numbers, and which such line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--grep", default=LINES, help="the lines to compare (a regex)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the bench and its options")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the bench after --, e.g. -- bench/load.py --sessions 200")
    wanted = re.compile(args.grep)
    base = _commit(args.base)
    with tempfile.TemporaryDirectory(prefix="pairs-") as parent:
        tree = Path(parent) / "base"
        _git("worktree", "add", "--detach", "--quiet", str(tree), base)
        try:
            (tree / ".venv").symlink_to(ROOT / ".venv")
            runs = {base[:8]: tree, "working": ROOT}
            figures: dict[str, dict[Shape, list[list[float]]]] = {
                name: defaultdict(list) for name in runs
            }
            for n in range(1, args.runs + 1):
                for name, where in runs.items():
                    print(f"--- {name}, run {n} of {args.runs}", flush=True)
                    seen: dict[tuple[str, ...], int] = defaultdict(int)
                    for line in _run(where, command):
                        if wanted.search(line):
                            print(line, flush=True)
                            words, numbers = _split(line)
                            seen[words] += 1  # the same words again: the next size's line
                            figures[name][(words, seen[words])].append(numbers)
        finally:
            _git("worktree", "remove", "--force", str(tree))
    print(f"--- medians of {args.runs} runs each, {' against '.join(runs)}:")
    for shape in figures[base[:8]]:
        for name in runs:
            found = figures[name].get(shape)
            if found:
                print(f"  {name:>8}  {_joined(shape[0], _medians(found))}")


def _commit(revision: str) -> str:
    return _git("rev-parse", "--verify", f"{revision}^{{commit}}").strip()


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _run(where: Path, command: list[str]) -> list[str]:
    """The bench's output, run in `where` with this checkout's interpreter."""
    done = subprocess.run(
        [sys.executable, *command], cwd=where, capture_output=True, text=True, check=False
    )
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed in {where}:\n{done.stderr[-2000:]}")
    return done.stdout.splitlines()


def _split(line: str) -> tuple[tuple[str, ...], list[float]]:
    """A line's words around its numbers (runs of spaces as one: a column's padding changes
    with its number's width), and its numbers (thousands separators dropped)."""
    numbers = [float(found.replace(",", "")) for found in NUMBER.findall(line)]
    return tuple(re.sub(r"\s+", " ", words) for words in NUMBER.split(line)), numbers


def _medians(found: list[list[float]]) -> list[float]:
    return [statistics.median(column) for column in zip(*found, strict=True)]


def _joined(shape: tuple[str, ...], numbers: list[float]) -> str:
    pieces = [shape[0]]
    for number, after in zip(numbers, shape[1:], strict=True):
        pieces.append(f"{number:g}" if number != int(number) else f"{int(number)}")
        pieces.append(after)
    return "".join(pieces).strip()


if __name__ == "__main__":
    main()
