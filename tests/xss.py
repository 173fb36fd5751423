"""A corpus of script-injection payloads, and a scanner for HTML that would run one.

Every payload calls `alert`, so a browser test sees any that runs as a dialog.
"""

from __future__ import annotations

from html.parser import HTMLParser

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    "<svg onload=alert(3)>",
    "<svg><script>alert(4)</script></svg>",
    '<iframe src="javascript:alert(5)"></iframe>',
    '<a href="javascript:alert(6)">x</a>',
    "[link](javascript:alert(7))",
    "[link](JaVaScRiPt:alert(8))",
    "[link](data:text/html,<script>alert(9)</script>)",
    "![image](javascript:alert(10))",
    '![image](x" onerror="alert(11))',
    "<body onload=alert(12)>",
    "<details open ontoggle=alert(13)>",
    "<input autofocus onfocus=alert(14)>",
    "<video><source onerror=alert(15)></video>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(16)>",
    '"><script>alert(17)</script>',
    "'><img src=x onerror=alert(18)>",
    "</textarea><script>alert(19)</script>",
    "</title><script>alert(20)</script>",
    "<style>@import 'javascript:alert(21)'</style>",
    '<div style="background:url(javascript:alert(22))">styled</div>',
    '<object data="javascript:alert(23)"></object>',
    '<embed src="javascript:alert(24)">',
    '<form action="javascript:alert(25)"><button>x</button></form>',
    "<button formaction=javascript:alert(26)>x</button>",
    "<marquee onstart=alert(27)>m</marquee>",
    '<base href="javascript:alert(28)//">',
    '<meta http-equiv="refresh" content="0;url=javascript:alert(29)">',
    '<a href="&#106;avascript:alert(30)">x</a>',
    '<a href="jav&#x09;ascript:alert(31)">x</a>',
    "[link](&#106;avascript:alert(32))",
    '<a href=" javascript:alert(33)">x</a>',
    "<<script>script>alert(34)<</script>/script>",
    "<scr<script>ipt>alert(35)</script>",
    '<img """><script>alert(36)</script>">',
    "```\n</code></pre><script>alert(37)</script>\n```",
    "`<script>alert(38)</script>`",
    '<noscript><p title="</noscript><img src=x onerror=alert(39)>">',
    "<svg><animate onbegin=alert(40) attributeName=x dur=1s>",
    '<svg><a xlink:href="javascript:alert(41)"><text>x</text></a></svg>',
    "<img src=x:alert(alt) onerror=eval(src) alt=42>",
    '<!--<img src="--><img src=x onerror=alert(43)//">',
    "<xss id=x tabindex=1 onfocus=alert(44)></xss>",
    '<a href="#" onclick="alert(45)">click</a>',
    '[link](https://ok.example "t\\" onmouseover=\\"alert(46)")',
    "<svg/onload=alert(47)>",
    "<img/src/onerror=alert(48)>",
    '<div hx-get="/" hx-trigger="load" hx-on::after-request="alert(49)">htmx</div>',
    '<div hx-on:click="alert(50)">htmx</div>',
    '<span id="redirect" data-url="javascript:alert(51)">go</span>',
    '<div ws-send hx-vals=\'{"message": "/handoff"}\' hx-trigger="load">send</div>',
    "<img src=x onerror=&#97;lert(53)>",
    "javascript:alert(54)",
    "<script src=data:,alert(55)></script>",
    '<a href="vbscript:alert(56)">x</a>',
    "<IMG SRC=JaVaScRiPt:alert(57)>",
    "%3Cscript%3Ealert(58)%3C/script%3E <script>alert(58)</script>",
]

DANGEROUS_TAGS = {"script", "iframe", "object", "embed", "base", "frame", "frameset", "applet"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "data", "xlink:href", "background"}
# The page's own scripts: htmx (shipped by django-htmx), agentweb's app.js and theme.js.
OWN_SCRIPTS = ("/static/django_htmx/", "/static/app.js", "/static/theme.js")


class _Scanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.hx: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script" and any((named.get("src") or "").startswith(own) for own in OWN_SCRIPTS):
            return
        if tag in DANGEROUS_TAGS:
            self.found.append(f"<{tag}>")
        if tag == "meta" and (named.get("http-equiv") or "").lower() == "refresh":
            self.found.append("<meta refresh>")
        for name, value in attrs:
            if name.startswith("on") or name.startswith("hx-on"):
                self.found.append(f"{tag} {name}")
            if name in URL_ATTRIBUTES and value:
                scheme = "".join(value.split()).lower()
                if scheme.startswith(("javascript:", "vbscript:", "data:")):
                    self.found.append(f"{tag} {name}={value[:30]}")
            if name.startswith(("hx-", "ws-")):
                self.hx.append(f"{tag} {name}")


def dangerous(html: str) -> list[str]:
    """What in `html` could run a script: tags, event handlers, script URLs, htmx handlers."""
    scanner = _Scanner()
    scanner.feed(html)
    return scanner.found


def htmx_attributes(html: str) -> list[str]:
    """Every htmx / ws attribute: a page must have only those of its own templates."""
    scanner = _Scanner()
    scanner.feed(html)
    return scanner.hx
