"""Finished messages: markdown rendered, code highlighted, anything dangerous neutralised."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from sessions.rendering import pygments_css, render_markdown


def test_markdown_is_rendered():
    html = render_markdown("## Goal\n\n- **ship** it\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert "<h2>Goal</h2>" in html and "<strong>ship</strong>" in html and "<td>1</td>" in html


def test_fenced_code_is_highlighted():
    html = render_markdown("```python\ndef parse(x):\n    return x\n```")
    assert '<code class="highlight">' in html
    assert '<span class="k">def</span>' in html


def test_code_in_an_unknown_language_is_escaped_plain_code():
    html = render_markdown("```nosuchlang\n<b>x</b>\n```")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html


def test_raw_html_is_shown_as_text():
    html = render_markdown("<img src=x onerror=alert(1)> <script>alert(2)</script>")
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_javascript_links_are_dropped_and_others_made_safe():
    html = render_markdown("[a](javascript:alert(1)) [b](https://example.org)")
    assert 'href="javascript:' not in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_the_shipped_highlight_css_matches_pygments():
    shipped = (Path(__file__).resolve().parents[1] / "static" / "highlight.css").read_text()
    assert pygments_css() in shipped


@pytest.mark.django_db
def test_your_own_message_is_safe_markdown_with_its_lines_kept(client, owner):
    from .conftest import make_session

    session = make_session(owner)
    text = "Use **tomllib**, not `toml`\nsecond line\n\n- a\n- b <script>alert(1)</script>"
    session.append_message("user", [{"type": "text", "text": text}])
    client.force_login(owner)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "<p>Use <strong>tomllib</strong>, not <code>toml</code><br>\nsecond line</p>" in page
    assert "<li>b &lt;script&gt;alert(1)&lt;/script&gt;</li>" in page


def test_a_tables_alignment_is_a_class_never_an_inline_style():
    html = render_markdown("| L | C | R | - |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |")
    assert '<th class="align-left">L</th>' in html
    assert '<td class="align-center">2</td>' in html
    assert '<td class="align-right">3</td>' in html
    assert "<td>4</td>" in html
    assert "style=" not in html


def test_the_sanitiser_alone_strips_what_a_parser_that_passes_html_through_would_let_in():
    """nh3 is a guard of its own: with markdown-it's raw HTML switched on (as agentweb never
    has it), the cleaner still leaves no script, handler, style or script URL."""
    from markdown_it import MarkdownIt

    from sessions.rendering import _cleaner  # agentweb's own cleaner, its rules as shipped

    raw = MarkdownIt("commonmark", {"html": True}).render(
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n'
        '<p style="color:red" onclick="alert(3)">hi</p>\n\n<a href="javascript:alert(4)">x</a>'
        '\n\n<iframe src="https://evil.example"></iframe>'
    )
    assert "<script>" in raw and "onerror" in raw  # the parser let them through
    cleaned = _cleaner().clean(raw)
    for gone in (
        "<script",
        "alert(1)",
        "onerror",
        "onclick",
        "style=",
        "javascript:",
        "<iframe",
        "<img",
    ):
        assert gone not in cleaned, gone
    assert "<p>hi</p>" in cleaned


def test_a_task_list_renders_as_read_only_boxes_that_say_their_state():
    html = render_markdown("- [x] Wrote the parser\n- [ ] Ship it\n- plain item")
    # The sanitiser writes attributes in no fixed order: read them as a parser would.
    assert _items_of(html) == [
        (
            {
                "class": "task-list-item-checkbox",
                "aria-label": "Done",
                "checked": "checked",
                "type": "checkbox",
                "disabled": "disabled",
            },
            "Wrote the parser",
        ),
        (
            {
                "class": "task-list-item-checkbox",
                "aria-label": "Not done",
                "type": "checkbox",
                "disabled": "disabled",
            },
            "Ship it",
        ),
        (None, "plain item"),
    ]
    assert "[ ]" not in html and "[x]" not in html


def _items_of(html: str) -> list[tuple[dict[str, str | None] | None, str]]:
    """Each list item as (its checkbox's attributes or None, its text)."""
    items: list[tuple[dict[str, str | None] | None, str]] = []

    class Items(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "li":
                items.append((None, ""))
            elif tag == "input" and items:
                items[-1] = (dict(attrs), items[-1][1])

        def handle_data(self, data: str) -> None:
            if items:
                items[-1] = (items[-1][0], items[-1][1] + data)

    Items().feed(html)
    return [(box, text.strip()) for box, text in items]


def test_an_input_typed_in_a_message_stays_text():
    html = render_markdown('<input type="text" value="x"> and <input type=checkbox checked>')
    assert "<input" not in html and "&lt;input" in html
