"""A chat that fits a phone and a long day (issue 20): at 375 × 812 what is fixed or sticky
covers under a third of the screen, the top bar is one line, nothing scrolls sideways, the
todo list is a drawer; sending brings the exchange into view; a reader who scrolled up is left
alone with Jump to latest; earlier entries load on scrolling up and keep the place; Escape
closes a menu before it cancels; the sidebar lists recent sessions. Screenshots are kept."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions.models import ChatSession

from ..conftest import FAKE_MODEL, linear_session
from ..fake_anthropic import Reply
from ..test_browse import hand_off
from .conftest import ARTIFACTS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 375, "height": 812}
LAPTOP = {"width": 1440, "height": 900}


def long_session(entries: int = 260, *, user: str = "walker", model: str = "local"):
    owner = User.objects.get(username=user)
    texts = [f"Step {i}: " + "the parser and the config loader " * 4 for i in range(entries)]
    return linear_session(owner, texts, model=model)


def covered(page) -> float:
    """The height of the screen that fixed or sticky parts of the page cover together."""
    return page.evaluate(
        """() => [...document.querySelectorAll('body *')].filter((el) => {
            const position = getComputedStyle(el).position;
            return (position === 'fixed' || position === 'sticky') && el.offsetParent !== null
              && !el.parentElement.closest('.topbar, .dock, .todos');
          }).map((el) => {
            const box = el.getBoundingClientRect();
            return Math.max(0, Math.min(box.bottom, innerHeight) - Math.max(box.top, 0));
          }).reduce((a, b) => a + b, 0)"""
    )


def sideways(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def placeholder_fits(field) -> bool:
    """Whether the field is wide enough to show its whole placeholder."""
    return field.evaluate(
        """(el) => {
            const style = getComputedStyle(el), ctx = document.createElement('canvas').getContext('2d');
            ctx.font = style.font;
            const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
            return ctx.measureText(el.placeholder).width <= room;
        }"""
    )


def test_on_a_phone_the_chat_has_the_room_and_the_exchange_stays_in_view(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(PHONE)
    session = long_session(40)
    page.goto(f"{server_url}{session.get_absolute_url()}")
    assert covered(page) <= 0.3 * 812, f"fixed and sticky parts cover {covered(page)} px"
    assert page.locator(".topbar").bounding_box()["height"] < 50  # one line
    assert sideways(page) <= 0
    page.get_by_label("Message").fill("Where does the parser stand?")
    page.get_by_label("Message").press("Enter")
    mine = page.locator("#transcript .entry--user").last
    expect(mine).to_contain_text("Where does the parser stand?")
    expect(mine).to_be_in_viewport()
    reply = page.locator("#transcript .entry--assistant.status--complete").last
    expect(reply).to_be_in_viewport(timeout=20_000)
    assert covered(page) <= 0.3 * 812

    page.get_by_role("button", name="Menu").click()  # the top bar's links fold into a menu
    expect(page.get_by_role("link", name="Prompts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("link", name="Prompts")).to_be_hidden()

    drawer = page.locator("#todos")
    drawer.locator("summary").click()
    box = drawer.bounding_box()
    assert box["x"] > 0 and box["height"] >= 800, box  # a panel from the right, full height
    page.keyboard.press("Escape")
    expect(drawer).not_to_have_attribute("open", "")
    expect(page.locator("#sidebar")).to_be_hidden()  # out of the way on a phone


def test_no_page_scrolls_sideways_on_a_phone_and_screenshots_are_kept(signed_in, server_url):
    page = signed_in
    owner = User.objects.get(username="walker")
    old = linear_session(owner, ["Fix src/app/views.py " * 6, "Keep TIMEOUT at 30 s"])
    old.rename("Fix the views")
    new = hand_off(old, "## Goal\nFix `src/app/views.py` " + "and the long path/a/b/c/d " * 5)
    pages = {
        "session": new.get_absolute_url(),
        "side-by-side": f"/sessions/{old.pk}/compare/{new.pk}/",
        "tree": f"/sessions/{old.pk}/tree/",
        "list": "/",
    }
    ARTIFACTS.mkdir(exist_ok=True)
    for size, viewport in (("375", PHONE), ("1440", LAPTOP)):
        page.set_viewport_size(viewport)
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            for name, url in pages.items():
                page.goto(f"{server_url}{url}")
                assert sideways(page) <= 0, f"{name} at {size} px scrolls sideways"
                if name == "list":
                    assert placeholder_fits(page.get_by_label("Find sessions")), size
                page.screenshot(path=str(ARTIFACTS / f"{name}-{size}-{theme}.png"))


@pytest.fixture
def on_claude(page, claude_url, fake_server, django_user_model):
    """A signed-in page on Claude (the fake server), whose next reply is held after its first
    words until the test releases it."""
    fake_server.reset()
    fake_server.enqueue(Reply.held(["Once upon"], [" a time."]))
    sign_in(page, claude_url, django_user_model, "reader")
    page.set_viewport_size(LAPTOP)
    return page


def test_a_reader_who_scrolled_up_is_left_alone_with_jump_to_latest(
    on_claude, claude_url, fake_server
):
    page = on_claude
    session = long_session(60, user="reader", model=FAKE_MODEL)
    page.goto(f"{claude_url}{session.get_absolute_url()}")
    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_label("Message").fill("Tell me a story")
    page.get_by_label("Message").press("Enter")  # from far up: the message comes into view
    expect(page.locator("#transcript .entry--user").last).to_be_in_viewport()
    expect(page.locator("#live .entry--streaming")).to_contain_text("Once upon")
    page.mouse.move(700, 300)
    page.mouse.wheel(0, -3000)  # the reader scrolls up while the reply streams
    # Until the wheel has scrolled: awaited in the page by `evaluate`, which the page's CSP
    # allows (`wait_for_function` polls through `eval` once its first look fails, which it
    # forbids).
    page.evaluate(
        """() => new Promise(scrolled => {
            const look = () => window.scrollY < document.documentElement.scrollHeight - 2000
                ? scrolled() : requestAnimationFrame(look);
            look();
        })"""
    )
    top = page.evaluate("window.scrollY")
    fake_server.release()
    jump = page.get_by_role("button", name="Jump to latest ↓")
    expect(jump).to_be_visible()
    expect(page.locator("#transcript .entry--assistant.status--complete").last).to_contain_text(
        "Once upon a time."
    )
    assert page.evaluate("window.scrollY") == top  # left where they are
    jump.click()
    expect(jump).to_be_hidden()
    expect(page.locator("#transcript .entry--assistant.status--complete").last).to_be_in_viewport()


def test_earlier_entries_load_on_scrolling_up_and_keep_the_place(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(LAPTOP)
    session = long_session(260)
    page.goto(f"{server_url}{session.get_absolute_url()}")
    entries = page.locator("#transcript .entry")
    before = entries.count()
    held = []  # the request for earlier entries waits until the test lets it go
    page.route(re.compile(r"/entries/\?before=\d+"), lambda route: held.append(route))
    first_id = entries.first.get_attribute("id")
    page.locator(f"#{first_id}").scroll_into_view_if_needed()
    shown_at = page.evaluate(  # up to the start (the earlier entries load): where it is then
        f"() => {{ window.scrollBy(0, -200); "
        f"return document.getElementById('{first_id}').getBoundingClientRect().top; }}"
    )
    expect(page.get_by_text("Loading earlier entries…")).to_be_visible()
    assert len(held) == 1
    held[0].continue_()
    expect(entries).to_have_count(260, timeout=10_000)
    assert before == 200
    after = page.locator(f"#{first_id}").bounding_box()["y"]
    assert abs(after - shown_at) < 40, (shown_at, after)  # the place is kept
    expect(page.locator(".earlier")).to_have_count(0)


def test_a_long_page_lays_out_no_edit_box_until_its_edit_is_opened(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(LAPTOP)
    session = long_session(260)  # a user message every other entry, each with its Edit
    page.goto(f"{server_url}{session.get_absolute_url()}")
    expect(page.locator("#transcript .entry")).to_have_count(200)
    assert page.locator("#transcript textarea").count() == 0  # no edit box laid out
    last_question = page.locator("#transcript .entry--user").last
    last_question.get_by_text("Edit", exact=True).click()
    wording = last_question.get_by_label("New wording")
    expect(wording).to_have_value(re.compile(r"^Step 259: the parser and the config loader"))
    assert page.locator("#transcript textarea").count() == 1  # the one opened
    wording.fill("Step 259, again")
    last_question.get_by_role("button", name="Send edited message").click()
    expect(page.locator("#transcript .entry--user").last.locator(".markdown")).to_have_text(
        "Step 259, again"
    )


def test_escape_closes_the_slash_menu_before_it_cancels(on_claude, claude_url):
    page = on_claude
    session = long_session(4, user="reader", model=FAKE_MODEL)
    page.goto(f"{claude_url}{session.get_absolute_url()}")
    box = page.get_by_label("Message")
    box.fill("Tell me a story")
    box.press("Enter")
    expect(page.locator("#live .entry--streaming")).to_contain_text("Once upon")
    box.press_sequentially("/")
    expect(page.locator("#slash-menu")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#slash-menu")).to_be_hidden()
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()  # still generating
    page.keyboard.press("Escape")
    expect(page.locator("#transcript .entry--assistant").last).to_contain_text("Cancelled")


def test_the_sidebar_lists_recent_sessions_marks_this_one_and_hides(signed_in, server_url):
    page = signed_in
    page.set_viewport_size(LAPTOP)
    owner = User.objects.get(username="walker")
    other = ChatSession.objects.create(owner=owner, title="The gateway rewrite")
    session = ChatSession.objects.create(owner=owner, title="The billing migration")
    page.goto(f"{server_url}{session.get_absolute_url()}")
    sidebar = page.get_by_role("complementary", name="Recent sessions")
    expect(sidebar.get_by_role("link", name="The billing migration")).to_have_attribute(
        "aria-current", "page"
    )
    expect(sidebar.get_by_role("link", name="The gateway rewrite")).to_have_attribute(
        "href", other.get_absolute_url()
    )
    sidebar.get_by_role("button", name="Hide").click()
    expect(sidebar.get_by_role("link", name="The gateway rewrite")).to_be_hidden()
    page.reload()
    expect(page.get_by_role("button", name="Show")).to_be_visible()  # as the reader left it
    page.get_by_role("button", name="Show").click()
    expect(sidebar.get_by_role("link", name="The gateway rewrite")).to_be_visible()
