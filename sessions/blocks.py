"""Where the markdown blocks of a streaming reply end, so each is rendered once when it ends."""

from __future__ import annotations

import re

FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")


class Blocks:
    """A markdown reply as it streams: where its finished blocks end, so each is rendered once,
    through the same pipeline as a finished message, while the open one stays plain text.

    A block ends at a blank line, after a heading and after a closing code fence, and before an
    opening one; inside a code block only its closing fence ends it. Each complete line is read
    once: a reply costs O(n) however it is cut into deltas.
    """

    def __init__(self, text: str = "") -> None:
        self.text = ""
        self.closed = 0  # the finished blocks are text[:closed]
        self._line = 0  # where the first line not read yet starts
        self._fence = ""  # the open code block's fence, if any
        self.add(text)

    def add(self, text: str) -> str:
        """Take more of the reply; the markdown of the blocks it finished ("" if none)."""
        start = self.closed
        self.text += text
        while (end := self.text.find("\n", self._line)) != -1:
            self._read(self.text[self._line : end], end + 1)
            self._line = end + 1
        return self.text[start : self.closed]

    @property
    def finished(self) -> str:
        """The markdown of every finished block."""
        return self.text[: self.closed]

    @property
    def tail(self) -> str:
        """The open block: shown as plain text until it ends."""
        return self.text[self.closed :]

    def _read(self, line: str, after: int) -> None:
        fence = FENCE.match(line)
        if self._fence:
            if (
                fence is not None
                and fence[1][0] == self._fence[0]
                and len(fence[1]) >= len(self._fence)
                and not line[fence.end() :].strip()
            ):
                self._fence, self.closed = "", after
        elif fence:
            self._fence, self.closed = fence[1], self._line
        elif not line.strip() or HEADING.match(line):
            self.closed = after
