"""docs/RELIABILITY.md says what holds and names the test that makes it true: every test and
test file it names exists (a name ending in "…" is the start of one)."""

from __future__ import annotations

import re

from .servers import ROOT

DOC = ROOT / "docs" / "RELIABILITY.md"


def defined_tests() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names |= set(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M))
    return names


def test_every_test_the_reliability_page_names_exists():
    text = DOC.read_text()
    defined = defined_tests()
    named = re.findall(r"`(test_\w+)(…?)`", text)
    assert len(named) > 40
    missing = [
        name + cut
        for name, cut in named
        if not (any(d.startswith(name) for d in defined) if cut else name in defined)
    ]
    assert missing == []
    files = re.findall(r"`(tests/[\w/]+\.py)`", text)
    assert [f for f in files if not (ROOT / f).exists()] == []
