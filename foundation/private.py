"""Files only their owner may read (the secret key, the first account's password)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def create_private(path: Path, content: str) -> bool:
    """Write `path` with mode 0600 from its first byte, whole or not at all.

    The content goes to a private temporary file that is then hard-linked into place, so
    another process never reads half a file. False when `path` exists already.
    """
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as file:  # mkstemp creates it 0600
            file.write(content)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def read_or_create(path: Path, make: Callable[[], str]) -> str:
    """The file's content, or a new private file holding `make()`; processes that start at
    once all get the value of the one that wrote first."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    value = make()
    if create_private(path, value):
        return value
    return path.read_text().strip()
