"""Markdown to safe HTML: finished messages, and the finished blocks of a streaming reply
(its open block stays plain text until it closes)."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import nh3
from cachetools import LRUCache, cached
from latex2mathml.converter import convert as mathml
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.tasklists import tasklists_plugin
from mdit_py_plugins.texmath import texmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

# Math as MathML (latex2mathml's presentation elements): no `annotation-xml` or `maction`, which
# can carry HTML or behaviour, and no `href`, `style` or `class` on any of them.
MATHML_TAGS = {
    "math", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msup", "msub", "msubsup",
    "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "menclose", "mpadded", "mphantom", "merror",
}  # fmt: skip
MATHML_ATTRIBUTES = {
    "display", "displaystyle", "scriptlevel", "mathvariant", "mathcolor", "stretchy", "fence",
    "separator", "lspace", "rspace", "accent", "accentunder", "linethickness", "columnalign",
    "rowspacing", "columnspacing", "width", "height", "depth", "notation", "movablelimits",
    "largeop", "symmetric", "minsize", "maxsize", "form",
}  # fmt: skip
ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "span", "div",
    "input",  # a task list's box, only as the tasklists plugin writes it (raw HTML is escaped)
    *MATHML_TAGS,
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},
    "div": {"class"},
    "code": {"class"},
    "th": {"class"},
    "td": {"class"},
    "ol": {"start"},
    "ul": {"class"},
    "li": {"class"},
    "input": {"class", "checked", "aria-label"},
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
# A task list's box is a read-only checkbox, whatever the input said.
FORCED = {"input": {"type": "checkbox", "disabled": "disabled"}}
_formatter = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes it itself
    return f'<pre><code class="highlight">{highlight(code, lexer, _formatter)}</code></pre>'


@lru_cache(maxsize=2)
def _markdown(breaks: bool = False) -> MarkdownIt:
    md = MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "highlight": _highlight, "breaks": breaks},
    ).enable(["table", "strikethrough"])
    md.use(tasklists_plugin)  # `- [ ] item` as a box: every handoff's Progress and Next Steps
    # Math: `\(…\)` and `\[…\]` (texmath's rules), `$…$` and `$$…$$` (dollarmath's, whose
    # renderer, added last, renders both): MathML from the server, no script in the page. A
    # dollar beside a digit or a space is money, not math ("$5 and $10").
    md.use(texmath_plugin, delimiters="brackets")
    md.use(
        dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True, renderer=_math
    )
    md.add_render_rule("math_inline_double", _display_in_a_line)  # a span: the paragraph holds
    md.core.ruler.push("aligned_by_class", _aligned_by_class)
    md.core.ruler.push("task_boxes_named", _task_boxes_named)
    return md


def _display_in_a_line(
    renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    """`$$…$$` inside a sentence: displayed math in a span (dollarmath writes a div, which
    ends the paragraph around it)."""
    return f'<span class="math display">{_math(tokens[idx].content, {"display_mode": True})}</span>'


def _math(tex: str, options: dict[str, Any]) -> str:
    """TeX as MathML (block or inline); TeX latex2mathml cannot read stays as code."""
    try:
        return mathml(tex, display="block" if options.get("display_mode") else "inline")
    except Exception:  # noqa: BLE001 - its parser raises errors of many kinds on bad TeX
        return f'<code class="math">{html.escape(tex)}</code>'


# A table column's alignment, as markdown-it writes it and as a class (app.css).
_ALIGNED = {f"text-align:{side}": f"align-{side}" for side in ("left", "center", "right")}


def _aligned_by_class(state: StateCore) -> None:
    """A table cell's alignment as a class, not the `style` attribute markdown-it writes: the
    Content-Security-Policy's `style-src 'self'` blocks inline styles (and nh3 drops them)."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = token.attrs.pop("style", None)
            if isinstance(style, str) and style in _ALIGNED:
                token.attrSet("class", _ALIGNED[style])


TASK_BOX = '<input class="task-list-item-checkbox"'


def _task_boxes_named(state: StateCore) -> None:
    """A task list's box says what it shows to a screen reader ("Done", "Not done")."""
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "html_inline" and child.content.startswith(TASK_BOX):
                said = "Done" if 'checked="checked"' in child.content else "Not done"
                child.content = child.content.replace(TASK_BOX, f'{TASK_BOX} aria-label="{said}"')


# A message never changes once written, so its HTML is rendered once per process: the session
# page, side by side and the earlier entries show the same messages again and again. Kept by
# size (about 16 MB of text and HTML), the least recently shown dropped first.
_rendered: LRUCache[tuple[str, bool], str] = LRUCache(
    maxsize=16_000_000, getsizeof=lambda html: 2 * len(html)
)


@cached(_rendered, key=lambda text, *, breaks=False: (text, breaks), lock=threading.Lock())
def render_markdown(text: str, *, breaks: bool = False) -> str:
    """Render untrusted markdown: raw HTML is escaped by the parser, the output is sanitised.
    With `breaks`, each new line is a line break (a person's own message, typed as lines)."""
    return _cleaner().clean(_markdown(breaks).render(text))


@lru_cache(maxsize=1)
def _cleaner() -> nh3.Cleaner:
    """The sanitiser, its rules built once (`nh3.clean` builds them at every call: most of the
    cost of a short message's clean)."""
    return nh3.Cleaner(
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        set_tag_attribute_values=FORCED,
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


# A tag of sanitised HTML (quoted attribute values may hold ">"), or the text between tags.
_TAG = re.compile(r"""<[^"'>]*(?:"[^"]*"[^"'>]*|'[^']*'[^"'>]*)*>""")
_KEEP_AS_IS = ("a", "code", "pre")  # text inside these is never turned into links


def replace_in_text(
    html: str, pattern: re.Pattern[str], make: Callable[[re.Match[str]], str]
) -> str:
    """The sanitised `html` with each match of `pattern` in its text (outside tags, links and
    code) replaced by `make(match)`, which is HTML."""
    out: list[str] = []
    inside = 0
    at = 0
    for tag in _TAG.finditer(html):
        text = html[at : tag.start()]
        out.append(text if inside else pattern.sub(make, text))
        name = re.match(r"</?([a-zA-Z0-9]+)", tag.group())
        if name and name.group(1).lower() in _KEEP_AS_IS:
            inside += -1 if tag.group().startswith("</") else 1
            inside = max(inside, 0)
        out.append(tag.group())
        at = tag.end()
    tail = html[at:]
    out.append(tail if inside else pattern.sub(make, tail))
    return "".join(out)
