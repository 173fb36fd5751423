"""The shape of a session's tree, from a map of each entry's parent: paths, children, siblings.

Pure: the store's queries and the models' branch moves read a session's (id, parent id) pairs
once, in one small query, and walk them here, whatever the session's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Parents = Mapping[int, int | None]  # entry id -> its parent's id (None: a root)


def path_to(leaf_id: int | None, parents: Parents) -> list[int]:
    """The ids from the root to `leaf_id`, following `parents`."""
    path: list[int] = []
    current = leaf_id
    while current is not None and current in parents:
        path.append(current)
        current = parents[current]
    path.reverse()
    return path


def children(parents: Parents) -> dict[int | None, list[int]]:
    """Each entry's children (the roots under None), oldest first."""
    found: dict[int | None, list[int]] = {}
    for entry_id in sorted(parents):
        found.setdefault(parents[entry_id], []).append(entry_id)
    return found


def tip(entry_id: int, children_of: Mapping[int | None, list[int]]) -> int:
    """The newest entry of the subtree under `entry_id`: the end of the branch last written
    there, which a switch to that branch shows."""
    newest, stack = entry_id, [entry_id]
    while stack:
        current = stack.pop()
        newest = max(newest, current)
        stack.extend(children_of.get(current, []))
    return newest


@dataclass(frozen=True)
class Siblings:
    """Where an entry stands among the entries that share its parent (the branches there)."""

    position: int  # from 1, oldest first
    count: int
    previous: int | None  # the sibling before it, if any
    next: int | None  # the sibling after it, if any


def siblings_among(entry_id: int, family: list[int]) -> Siblings | None:
    """Where `entry_id` stands in `family` (its parent's children, oldest first); None alone."""
    if len(family) < 2:
        return None
    at = family.index(entry_id)
    return Siblings(
        at + 1,
        len(family),
        family[at - 1] if at > 0 else None,
        family[at + 1] if at + 1 < len(family) else None,
    )
