"""Recall in Chromium, with no key (issue 19, done when): after a handoff, a question about a
detail the document left out is answered from the old session, with a link to the exact entry;
the link opens the old session at that entry, marked."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from sessions import handoff

from ..conftest import make_session

pytestmark = pytest.mark.django_db(transaction=True)

DETAIL = "The zanzibar endpoint needs the header X-Trace-Id on every call."


def test_the_offline_model_recalls_a_dropped_detail_and_its_link_opens_the_entry(
    signed_in, server_url
):
    page = signed_in
    walker = User.objects.get(username="walker")
    old = make_session(walker, model="local", exchanges=2)
    said = old.append_message("assistant", [{"type": "text", "text": DETAIL}])
    document = "## Goal\nShip the gateway."
    reply = old.append_message(
        "assistant", [{"type": "text", "text": document}], data={"purpose": "handoff"}
    )
    new = handoff.new_session(old, from_entry=reply, content=handoff.wrap(document, came_from=old), data={})  # fmt: skip

    page.goto(f"{server_url}{new.get_absolute_url()}")
    box = page.get_by_label("Message")
    box.fill("Which header did zanzibar need?")
    box.press("Enter")
    answer = page.locator("#transcript .entry--assistant.status--complete").last
    expect(answer).to_contain_text("From the earlier sessions, best match first:", timeout=30_000)
    expect(answer).to_contain_text("zanzibar endpoint needs the header X-Trace-Id")
    link = answer.get_by_role("link", name=f"session {old.pk}, entry {said.pk}")
    expect(link).to_have_attribute("href", f"/sessions/{old.pk}/?at={said.pk}#entry-{said.pk}")
    link.click()
    page.wait_for_url(f"{server_url}/sessions/{old.pk}/?at={said.pk}#entry-{said.pk}")
    target = page.locator(f"#entry-{said.pk}")
    expect(target).to_contain_text(DETAIL)
    assert page.evaluate("document.querySelector(':target').id") == f"entry-{said.pk}"
