"""Math in messages (issue 56, item 4): `$…$`, `$$…$$`, `\\(…\\)` and `\\[…\\]` render as MathML
from the server (no script in the page, as the Content-Security-Policy wants); money stays
text; hostile TeX is sanitised like everything else."""

from __future__ import annotations

from sessions.rendering import render_markdown


def test_inline_math_in_dollars_and_in_parentheses_is_mathml():
    html = render_markdown(r"Euler: $e^{i\pi}+1=0$, and \(a^2\) too.")
    assert html.count('<span class="math inline"><math display="inline">') == 2
    assert "<msup><mi>e</mi>" in html
    assert "<msup><mi>a</mi><mn>2</mn></msup>" in html
    assert "$" not in html and r"\(" not in html


def test_display_math_in_double_dollars_and_in_brackets_is_a_block():
    for tex in ("$$\n\\int_0^1 x\\,dx\n$$", r"\[ \sum_i i \]"):
        html = render_markdown(tex)
        assert '<div class="math block">' in html, tex
        assert 'display="block"' in html, tex


def test_double_dollars_inside_a_sentence_are_math_with_no_dollars_left():
    html = render_markdown("The energy is $$E = mc^2$$ here.")
    assert "$" not in html
    assert "<math " in html and "<msup><mi>c</mi><mn>2</mn></msup>" in html
    assert html.startswith("<p>The energy is ") and html.endswith(" here.</p>\n")


def test_money_and_code_keep_their_dollars():
    assert render_markdown("It costs $5 and $10.") == "<p>It costs $5 and $10.</p>\n"
    assert render_markdown("`$x$` in code") == "<p><code>$x$</code> in code</p>\n"


def test_tex_the_converter_cannot_read_stays_as_code():
    assert render_markdown(r"$x^$ is unfinished") == (
        '<p><span class="math inline"><code class="math">x^</code></span> is unfinished</p>\n'
    )


def test_hostile_tex_loses_its_html_links_and_styles():
    html = render_markdown(
        r"$\text{<img src=x onerror=alert(1)>}$ $\href{javascript:alert(1)}{x}$ "
        r"$\style{color:red}{y}$ $\class{evil}{z}$"
    )
    assert "<img" not in html and "onerror" not in html
    assert "javascript:" not in html and "href" not in html
    assert "style=" not in html and 'class="evil"' not in html
    assert "<mi>z</mi>" in html  # the math itself stays
