"""Markdown to safe HTML: finished messages, and the finished blocks of a streaming reply
(its open block stays plain text until it closes)."""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "span", "div",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},
    "div": {"class"},
    "code": {"class"},
    "th": {"style"},
    "td": {"style"},
    "ol": {"start"},
}
_formatter = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes it itself
    return f'<pre><code class="highlight">{highlight(code, lexer, _formatter)}</code></pre>'


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    return MarkdownIt(
        "commonmark", {"html": False, "linkify": False, "highlight": _highlight}
    ).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Render untrusted markdown: raw HTML is escaped by the parser, the output is sanitised."""
    html = _markdown().render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def pygments_css() -> str:
    """The code colours: Pygments "xcode" in light (each of its colours passes WCAG AA on the
    code background, where "friendly"'s comments did not), "github-dark" in dark (chosen with
    the theme toggle, or the system's when the toggle is on auto)."""
    light = HtmlFormatter(style="xcode").get_style_defs(".highlight")
    chosen = _dark_rules(':root[data-theme="dark"] .highlight')
    system = _dark_rules(':root:not([data-theme="light"]) .highlight')
    return f"{light}\n{chosen}\n@media (prefers-color-scheme: dark) {{\n{system}\n}}"


def _dark_rules(prefix: str) -> str:
    rules = HtmlFormatter(style="github-dark").get_style_defs(prefix)
    return "\n".join(line for line in rules.splitlines() if line.startswith(prefix))


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
