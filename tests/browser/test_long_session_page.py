"""A generated 2 MB session of the reference agent in the browser: import, tool work folded,
/handoff with no key, and side by side."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from bench.make_session import generate

from .conftest import ARTIFACTS, offline_server, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def quick_server(django_db_setup: Any, browser_available: None) -> Iterator[str]:
    """The offline model at a quick pace: a long handoff document streams in seconds."""
    yield from offline_server("daphne-long", token_delay="0.001")


@pytest.fixture
def session_file(tmp_path):
    path = tmp_path / "gateway-session.jsonl"
    path.write_text("\n".join(generate()) + "\n", encoding="utf-8")
    assert path.stat().st_size > 2 * 1024 * 1024
    return path


def test_a_2_mb_session_imports_hands_off_without_a_key_and_compares(
    page, quick_server, session_file, django_user_model
):
    sign_in(page, quick_server, django_user_model, "importer")

    page.get_by_label("Import a session file (JSONL)").set_input_files(str(session_file))
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    old_url = page.url
    expect(page.get_by_text("Imported gateway-session.jsonl.")).to_be_visible()
    expect(page.locator(".imported-from")).to_contain_text("anthropic/claude-sonnet-4-5")
    expect(page.locator("#model-picker")).to_have_value("local")
    expect(page.locator(".status-context")).to_contain_text(
        "Context: 137,776 tokens (69% of 200,000)"
    )

    # Tool work is folded: one line per call, its result opens under it.
    call = page.locator("details.tool").filter(has_text='read(path="').last
    expect(call.locator(".tool-result")).to_be_hidden()
    call.locator("summary").click()
    expect(call.locator(".tool-result")).to_contain_text("import { createClient } from 'redis';")
    expect(page.locator("details.tool--error").first).to_be_attached()
    # The latest compaction is older than the latest 200 entries: show earlier ones until it is in.
    for _ in range(3):
        if page.locator(".marker--compaction").count():
            break
        page.get_by_role("button", name=re.compile(r"Show \d+ earlier entries")).click()
        page.wait_for_load_state("networkidle")
    marker = page.locator(".marker--compaction").last
    expect(marker).to_contain_text("Context compacted · 184,709 tokens before")
    marker.locator("summary").click()
    expect(marker).to_contain_text("Replace the gateway's token bucket")

    page.get_by_label("Message").fill("/handoff")
    page.get_by_label("Message").press("Enter")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"), timeout=60_000)
    expect(page).not_to_have_url(old_url)
    expect(page.get_by_text("New session started with handoff context").first).to_be_visible()
    expect(page.locator(".handoff-coverage")).to_contain_text(
        re.compile(r"Salient items of the previous session the model carried: (\d+) of \1")
    )
    expect(page.locator(".entry--handoff .markdown")).to_contain_text(
        "src/limiter/slidingWindow.ts"
    )

    recorded = page.locator(".handoff-coverage").inner_text()

    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_role("link", name="Side by side").click()
    coverage = page.locator(".coverage")
    expect(coverage).to_contain_text(re.compile(r"\d+% salience-weighted coverage"))
    expect(page.locator("#column-old .handoff-focus")).to_contain_text("Handoff document")
    # The panel's figure is the one the switch recorded, and the list agrees with it.
    figures = re.findall(r"(\d+) of (\d+) \((\d+)% weighted\)", recorded)
    carried, salient, score = figures[-1]  # the model's own text: what agentweb added apart
    expect(coverage.locator(".coverage-score")).to_contain_text(
        f"{score}% salience-weighted coverage · {carried} of {salient} salient items of #"
    )
    missing = int(salient) - int(carried)
    expect(coverage.locator(".coverage-missing li")).to_have_count(missing)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "long-session-side-by-side.png"))

    # At a glance: both columns, headings first, start on the first screen at 1440 × 900.
    for side in ("old", "new"):
        heading = page.locator(f"#column-{side} > h2")
        expect(heading).to_be_in_viewport()
        assert heading.bounding_box()["y"] + 200 < 900
    # Each heading stays in view while its column scrolls.
    old_column = page.locator("#column-old")
    old_column.evaluate("column => { column.scrollTop = column.scrollHeight; }")
    expect(old_column.locator("> h2")).to_be_in_viewport()
    expect(old_column.locator("> h2")).to_contain_text("Old: ")
    assert old_column.locator("> h2").bounding_box()["y"] == pytest.approx(
        old_column.bounding_box()["y"], abs=2
    )
    # The details unfold: every salient item missed, then all items by kind.
    coverage.get_by_text(re.compile(r"All [\d,]+ items, by kind")).click()
    expect(coverage.locator(".coverage-items .carried").first).to_be_visible()

    # A phone: no sideways scrolling, with the details open.
    page.set_viewport_size({"width": 375, "height": 800})
    page.reload()
    page.screenshot(path=str(ARTIFACTS / "long-session-side-by-side-phone.png"))
    page.locator(".coverage summary").last.click()
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"
    page.get_by_role("tab", name=re.compile("Old")).click()
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the old column is {width[0]} px wide on a {width[1]} px screen"
