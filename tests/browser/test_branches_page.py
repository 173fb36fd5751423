"""In Chromium: edit a question, regenerate an answer, switch between the branches with
‹ and ›, jump from the tree view, and fork (issue 11, item 2)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..fake_anthropic import Reply
from .conftest import ARTIFACTS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_edit_regenerate_and_switch_between_branches(
    page, claude_url, fake_server, django_user_model
):
    fake_server.reset()
    fake_server.enqueue(
        Reply.text("Use configparser."),
        Reply.text("Use tomllib."),
        Reply.text("Then ruamel.yaml."),
    )
    sign_in(page, claude_url, django_user_model, "brancher")
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    page.get_by_label("Message").fill("Which parser for TOML?")
    page.get_by_label("Message").press("Enter")
    transcript = page.locator("#transcript")
    expect(transcript.locator(".entry--assistant.status--complete")).to_have_text(
        re.compile("Use configparser.")
    )

    # Regenerate: the new answer replaces the old one in view, with a switcher.
    transcript.get_by_role("button", name="Regenerate").click()
    answer = transcript.locator(".entry--assistant.status--complete")
    expect(answer).to_have_text(re.compile("Use tomllib."))
    expect(answer.locator(".branch-position")).to_have_text("2 / 2")
    expect(transcript).not_to_contain_text("Use configparser.")

    # ‹ goes back to the first answer, › forward again.
    answer.get_by_role("button", name="Previous branch").click()
    expect(transcript.locator(".entry--assistant")).to_have_text(re.compile("Use configparser."))
    expect(transcript.locator(".branch-position")).to_have_text("1 / 2")
    transcript.get_by_role("button", name="Next branch").click()
    expect(transcript.locator(".entry--assistant")).to_have_text(re.compile("Use tomllib."))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "branch-switcher.png"), full_page=True)

    # Edit the question: a new branch from the start, answered.
    question = transcript.locator(".entry--user")
    question.get_by_text("Edit", exact=True).click()
    question.get_by_label("New wording").fill("Which parser for YAML?")
    question.get_by_role("button", name="Send edited message").click()
    expect(transcript.locator(".entry--assistant.status--complete")).to_have_text(
        re.compile("Then ruamel.yaml.")
    )
    expect(transcript.locator(".entry--user .markdown")).to_have_text("Which parser for YAML?")
    expect(transcript.locator(".entry--user .branch-position")).to_have_text("2 / 2")

    # The tree view lists all three answers; choosing one goes back to its branch.
    page.get_by_role("link", name="Tree").click()
    tree = page.get_by_role("list", name="Session tree")
    expect(tree.get_by_role("button")).to_have_count(5)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tree-view.png"), full_page=True)
    tree.get_by_role("button", name=re.compile("Use configparser.")).click()
    page.wait_for_url(re.compile(r"\?at=\d+#entry-\d+$"))
    expect(transcript.locator(".entry--user .markdown")).to_have_text("Which parser for TOML?")
    expect(transcript.locator(".entry--assistant")).to_have_text(re.compile("Use configparser."))

    # Fork from the question: a new session holding only it.
    transcript.locator(".entry--user").get_by_role("button", name="Fork").click()
    expect(page.get_by_role("navigation", name="Lineage")).to_contain_text("Forked from")
    expect(page.locator("#transcript .entry")).to_have_count(1)
