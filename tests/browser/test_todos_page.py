"""In Chromium: the todo panel updates live while the model works and after a handoff, and the
user edits it by keyboard alone (issue 12)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..conftest import SIX_SECTIONS
from ..fake_anthropic import Reply
from .conftest import ARTIFACTS, focus_by_tab, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = {
    "todos": [
        {"text": "Read the config loader", "state": "done"},
        {"text": "Rewrite the parser", "state": "in_progress"},
        {"text": "Run the test suite", "state": "pending"},
    ]
}
DOCUMENT = "\n\n".join(
    f"## {section}\n"
    + {
        "Progress": "- [x] Read the config loader\n- [ ] Rewrite the parser",
        "Next Steps": "1. Run the test suite\n2. Update the changelog",
    }.get(section, f"{section} details.")
    for section in SIX_SECTIONS
)


def item_texts(page) -> list[str]:
    return [box.input_value() for box in page.locator("#todos .todo textarea").all()]


def test_the_panel_follows_the_model_and_comes_back_after_a_handoff(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(
        Reply.tool("todo_write", PLAN, text="Here is the plan."),
        Reply.held(["Rewriting"], [" the parser now."]),
        Reply.text(DOCUMENT),
    )
    page.set_viewport_size({"width": 1440, "height": 900})
    sign_in(page, claude_url, django_user_model, "planner")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    panel = page.locator("#todos")
    expect(panel).to_contain_text("none yet")
    page.get_by_label("Message").fill("Make the config parser fast")
    page.get_by_label("Message").press("Enter")

    # The list is in the panel while the model's next round still streams.
    expect(page.locator("#live-text")).to_have_text("Rewriting")
    expect(panel).to_contain_text("2 open of 3")
    assert item_texts(page) == [
        "Read the config loader",
        "Rewrite the parser",
        "Run the test suite",
    ]
    expect(panel.get_by_label("Done: Read the config loader")).to_be_checked()
    expect(panel.locator(".todo--in_progress")).to_contain_text("in progress")
    transcript = page.locator("#transcript")
    expect(transcript.locator(".tool-line")).to_have_text(
        "todo_write: 3 items: 1 done, 1 in progress, 1 pending"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "todos-live.png"), full_page=True)
    fake_server.release()
    expect(transcript.locator(".entry--assistant.status--complete").last).to_contain_text(
        "Rewriting the parser now."
    )

    old_url = page.url
    page.get_by_label("Message").fill("/handoff")
    page.get_by_label("Message").press("Enter")
    page.wait_for_url(lambda url: url != old_url and re.search(r"/sessions/\d+/$", url))
    expect(page.locator("#todos")).to_contain_text("3 open of 3")
    assert item_texts(page) == ["Rewrite the parser", "Run the test suite", "Update the changelog"]
    expect(page.locator("#transcript")).to_contain_text("Todo list carried over from the handoff")


def a_new_session(page, width: int):
    """A new session's page at that width; its todo panel."""
    page.set_viewport_size({"width": width, "height": 900})
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    return page.locator("#todos")


def test_the_list_is_edited_by_keyboard_alone(signed_in, server_url):
    page = signed_in
    panel = a_new_session(page, 1440)
    new_item = panel.get_by_label("New item")

    new_item.focus()
    page.keyboard.type("Write the docs")
    page.keyboard.press("Enter")
    expect(panel).to_contain_text("1 open of 1")
    expect(new_item).to_be_focused()
    page.keyboard.type("Ship it")
    page.keyboard.press("Enter")
    expect(panel).to_contain_text("2 open of 2")
    assert item_texts(page) == ["Write the docs", "Ship it"]

    # Shift+Tab back to "Move up: Ship it", then Enter.
    focus_by_tab(page, panel.get_by_role("button", name="Move up: Ship it"), key="Shift+Tab")
    page.keyboard.press("Enter")
    expect(panel.locator(".todo textarea").first).to_have_value("Ship it")
    expect(panel.get_by_label("Item 1")).to_be_focused()

    # Tick it with the space bar; the focus stays on its box.
    page.keyboard.press("Shift+Tab")
    expect(panel.get_by_label("Done: Ship it")).to_be_focused()
    page.keyboard.press("Space")
    expect(panel).to_contain_text("1 open of 2")
    expect(panel.get_by_label("Done: Ship it")).to_be_checked()
    expect(panel.get_by_label("Done: Ship it")).to_be_focused()

    # Edit a text and remove an item.
    page.keyboard.press("Tab")
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("Ship it on Friday")
    page.keyboard.press("Enter")
    expect(panel.get_by_label("Item 1")).to_have_value("Ship it on Friday")
    focus_by_tab(page, panel.get_by_role("button", name="Remove: Write the docs"))
    page.keyboard.press("Enter")
    expect(panel).to_contain_text("0 open of 1")
    assert item_texts(page) == ["Ship it on Friday"]
    page.reload()
    assert item_texts(page) == ["Ship it on Friday"]
    expect(page.locator("#transcript .marker--todos").first).to_have_text("Todo list edited")


def test_on_a_narrow_screen_the_list_is_a_drawer_that_stays_as_left(signed_in, server_url):
    page = signed_in
    panel = a_new_session(page, 375)
    expect(panel).not_to_have_attribute("open", "")
    page.get_by_label("Message").fill("- [ ] Read the config\n- [x] Install deps\ntodo: Write it")
    page.get_by_label("Message").press("Enter")
    expect(panel.locator("summary")).to_contain_text("2 open of 3")  # updated, still closed
    expect(panel).not_to_have_attribute("open", "")
    expect(panel.get_by_label("New item")).to_be_hidden()
    panel.locator("summary").click()
    expect(panel.get_by_label("Item 1")).to_have_value("Read the config")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow}px"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "todos-drawer-375.png"), full_page=True)


def test_each_items_controls_sit_on_its_row_and_long_text_wraps(signed_in, server_url):
    page = signed_in
    panel = a_new_session(page, 1440)
    long_text = "Rewrite the config loader so that " + "every nested table is read once " * 4
    for text in ("Ship it", long_text):
        panel.get_by_label("New item").fill(text)
        panel.get_by_label("New item").press("Enter")
        expect(panel.locator(".todo")).to_have_count(1 if text == "Ship it" else 2)
    for row in panel.locator(".todo").all():
        box, remove = (
            row.locator("textarea").bounding_box(),
            row.locator("button").last.bounding_box(),
        )
        assert remove["y"] < box["y"] + box["height"], "the controls went to a second row"
        assert remove["x"] > box["x"] + box["width"] - 1
    short, long = (row.locator("textarea") for row in panel.locator(".todo").all())
    assert long.bounding_box()["height"] > 1.8 * short.bounding_box()["height"]  # it wraps
    assert long.evaluate("el => el.scrollHeight <= el.clientHeight + 1")  # nothing cut off
    expect(long).to_have_value(long_text.strip())
