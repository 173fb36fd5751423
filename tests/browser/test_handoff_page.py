"""/handoff in a real browser with the offline model: cancel (button, Escape), then switch."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions.models import ChatSession

from ..conftest import FAKE_MODEL, make_session
from ..fake_anthropic import Reply
from .conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(signed_in, server_url):
    """The signed-in person's session with a little history, open in the page."""
    session = make_session(User.objects.get(username="walker"), model="local", exchanges=2)
    signed_in.goto(f"{server_url}{session.get_absolute_url()}")
    return session


def start_handoff(page, text="/handoff"):
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")
    expect(box).to_have_value("")
    expect(page.locator("#status")).to_contain_text("Generating handoff…")
    expect(page.locator("#live-text")).not_to_be_empty()


@pytest.mark.parametrize("how", ["button", "escape"])
def test_cancelling_a_handoff_keeps_the_person_in_the_old_session(
    page, claude_url, fake_server, django_user_model, how
):
    fake_server.reset()
    fake_server.enqueue(Reply.held(["## Goal\n", "Ship the "], ["parser."]))  # held until cancelled
    sign_in(page, claude_url, django_user_model, f"impatient-{how}")
    user = User.objects.get(username=f"impatient-{how}")
    conversation = make_session(user, model=FAKE_MODEL, exchanges=2)
    page.goto(f"{claude_url}{conversation.get_absolute_url()}")
    start_handoff(page)
    if how == "button":
        page.get_by_role("button", name="Cancel").click()
    else:
        page.keyboard.press("Escape")
    expect(page.locator("#notices")).to_contain_text("Handoff cancelled")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    expect(page.locator("#transcript .status--aborted")).to_contain_text("not handed off")
    assert page.url.endswith(conversation.get_absolute_url())
    assert ChatSession.objects.count() == 1


def test_a_handoff_lands_on_the_new_session_and_lineage_links_work_both_ways(
    signed_in, conversation, server_url
):
    page = signed_in
    start_handoff(page, "/handoff keep the tests green")
    page.wait_for_url(re.compile(rf"/sessions/(?!{conversation.pk}/)\d+/$"), timeout=30_000)
    new = ChatSession.objects.get(parent_session=conversation)
    assert page.url.endswith(new.get_absolute_url())
    handoff_message = page.locator("#transcript .entry--handoff")
    expect(handoff_message).to_contain_text("New session started with handoff context")
    # The focus is the goal (the offline model's document; the session's lines say nothing more).
    expect(handoff_message).to_contain_text(
        re.compile(r"Goal\s+keep the tests green\s+Constraints & Preferences")
    )
    expect(page.locator("#status")).to_contain_text("before handoff")

    page.get_by_role("link", name="Side by side").click()
    columns = page.locator(".compare-column")
    expect(columns).to_have_count(2)
    expect(columns.nth(0)).to_contain_text("question 0")
    expect(columns.nth(1)).to_contain_text("New session started with handoff context")

    page.go_back()
    page.get_by_role("link", name=re.compile(rf"\(#{conversation.pk}\)")).click()
    page.wait_for_url(f"{server_url}{conversation.get_absolute_url()}")
    expect(page.locator("#lineage")).to_contain_text("Continued in")
    page.get_by_role("link", name=re.compile(rf"\(#{new.pk}\)")).click()
    page.wait_for_url(f"{server_url}{new.get_absolute_url()}")


def test_with_review_on_the_person_edits_the_document_then_switches(
    signed_in, conversation, server_url
):
    from sessions.models import Preferences

    Preferences.objects.create(user=User.objects.get(username="walker"), review_handoff=True)
    page = signed_in
    start_handoff(page)
    document = page.get_by_label("Handoff document")
    expect(document).to_have_value(re.compile("## Goal"), timeout=30_000)
    assert ChatSession.objects.count() == 1
    document.fill("## Goal\nEdited in the review box.")
    page.get_by_role("button", name="Switch to new session").click()
    page.wait_for_url(re.compile(rf"/sessions/(?!{conversation.pk}/)\d+/$"))
    expect(page.locator("#transcript .entry--handoff")).to_contain_text("Edited in the review box.")


def test_compact_stays_on_the_page_with_a_divider_that_opens_to_the_summary(
    signed_in, conversation, server_url
):
    page = signed_in
    address = page.url
    box = page.get_by_label("Message")
    box.fill("/compact the parser only")
    box.press("Enter")
    divider = page.locator("#transcript details.marker--compaction")
    expect(divider).to_contain_text(re.compile(r"Context compacted · \d+ → \d+ tokens"))
    expect(page.locator("#notices")).to_contain_text("Compacted")
    assert page.url == address and ChatSession.objects.count() == 1
    summary = divider.locator(".markdown")
    expect(summary).to_be_hidden()
    divider.locator("summary").click()
    expect(summary).to_contain_text("the parser only")  # the offline document's goal
    # The entries above stay on the page; the chat goes on here.
    expect(page.locator("#transcript")).to_contain_text("question 0")
    box.fill("what next?")
    box.press("Enter")
    expect(page.locator("#transcript .entry--user").last).to_contain_text("what next?")
    reply = page.locator("#transcript .entry--user:has-text('what next?') ~ .entry--assistant")
    expect(reply.last).to_contain_text("offline model", timeout=20_000)
    assert page.url == address
