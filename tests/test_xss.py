"""Script injection, through every place text is shown: no payload of the corpus (tests/xss.py)
comes out as markup that could run. The browser test runs the same pages in Chromium."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from sessions import handoff, partials, session_file, store
from sessions.models import ChatSession, Entry

from .conftest import make_session
from .xss import PAYLOADS, dangerous, htmx_attributes

pytestmark = pytest.mark.django_db

# The htmx and ws attributes the templates themselves use.
OWN_HTMX = {
    "body hx-headers", "main hx-ext", "main ws-connect", "form ws-send", "button ws-send", "button hx-vals",
    "form hx-post", "form hx-trigger", "form hx-swap", "form hx-target", "button hx-get", "button hx-post", "button hx-target",
    "button hx-swap", "button hx-disabled-elt", "div hx-swap-oob", "h1 hx-swap-oob", "nav hx-swap-oob",
    "textarea hx-swap-oob", "section hx-swap-oob",
}  # fmt: skip


def gallery(owner) -> ChatSession:
    """A session with every payload as a user message and as an assistant's markdown."""
    session = make_session(owner, model="local")
    for payload in PAYLOADS:
        session.append_message("user", [{"type": "text", "text": payload}])
        session.append_message("assistant", [{"type": "text", "text": payload}])
    return session


def imported(owner) -> ChatSession:
    """An imported file with a payload in every field the page shows."""
    lines = [{"type": "session", "version": 3, "id": "s", "title": PAYLOADS[0], "cwd": PAYLOADS[1], "modelId": PAYLOADS[2]}]  # fmt: skip
    parent = None
    for n, p in enumerate(PAYLOADS):
        for kind, fields in (
            ("message", {"message": {"role": "user", "content": [{"type": "text", "text": p}, {"type": "image", "mimeType": p, "data": "x"}]}}),
            ("message", {"message": {"role": "assistant", "model": p, "provider": p, "stopReason": "error", "errorMessage": p, "content": [
                {"type": "thinking", "thinking": p}, {"type": "text", "text": p},
                {"type": "toolCall", "id": f"t{n}", "name": p, "arguments": {p: p}}]}}),
            ("message", {"message": {"role": "toolResult", "toolCallId": f"t{n}", "toolName": p, "isError": True, "content": [{"type": "text", "text": p}]}}),
            ("message", {"message": {"role": "bashExecution", "command": p, "output": p, "exitCode": 1}}),
            ("model_change", {"provider": p, "modelId": p}),
            ("thinking_level_change", {"thinkingLevel": p}),
            ("label", {"targetId": "x", "label": p}),
            ("compaction", {"summary": p, "firstKeptEntryId": "none", "tokensBefore": 1}),
            ("branch_summary", {"fromId": "x", "summary": p}),
            ("custom_message", {"customType": p, "content": p, "display": True}),
            ("custom", {"customType": p, "data": {"text": p}, "display": True}),
        ):  # fmt: skip
            entry_id = f"{n}-{kind}-{len(lines)}"
            lines.append({"type": kind, "id": entry_id, "parentId": parent, **fields})
            parent = entry_id
    return session_file.import_jsonl(owner, [json.dumps(line) for line in lines])


def assert_inert(html: str) -> None:
    assert dangerous(html) == []
    assert set(htmx_attributes(html)) <= OWN_HTMX, set(htmx_attributes(html)) - OWN_HTMX


def test_the_corpus_has_over_fifty_payloads_and_the_scanner_sees_raw_ones():
    assert len(set(PAYLOADS)) >= 50
    assert dangerous(PAYLOADS[0]) == ["<script>"]
    assert dangerous(PAYLOADS[1]) == ["img onerror"]
    assert dangerous('<a href="javascript:x">') == ["a href=javascript:x"]
    assert htmx_attributes(PAYLOADS[49]) == ["div hx-on:click"]


def test_messages_titles_and_the_session_list_are_inert(client, owner):
    client.force_login(owner)
    session = gallery(owner)
    for payload in PAYLOADS:
        titled = make_session(owner, model="local")
        ChatSession.objects.filter(pk=titled.pk).update(title=payload)
    page = client.get(session.get_absolute_url()).content.decode()
    assert page.count('<article id="entry-') == 2 * len(PAYLOADS)
    assert_inert(page)
    assert_inert(client.get("/").content.decode())
    assert_inert(
        client.get(reverse("chat:earlier", args=[session.pk]), {"before": 10**9}).content.decode()
    )


def test_every_field_of_an_imported_file_is_inert(client, owner):
    client.force_login(owner)
    session = imported(owner)
    html = client.get(session.get_absolute_url()).content.decode()
    assert_inert(html)
    earlier = client.get(reverse("chat:earlier", args=[session.pk]), {"before": store.get_branch(session)[-150].pk})  # fmt: skip
    assert_inert(earlier.content.decode())


def test_streamed_deltas_notices_titles_and_the_review_box_are_inert(owner):
    session = gallery(owner)
    reply = session.append_message("assistant", [{"type": "text", "text": "\n".join(PAYLOADS)}], data={"purpose": "handoff"})  # fmt: skip
    session.title = PAYLOADS[19]
    for payload in PAYLOADS:
        assert_inert(partials.delta(payload))
        assert_inert(partials.notice(payload, "error"))
        assert_inert(partials.composer_text(payload))
        assert_inert(partials.live(payload, "handoff", payload))
    assert_inert(partials.title(session))
    assert_inert(partials.review(reply, reply.text, reply.model))


def test_side_by_side_and_its_coverage_items_are_inert(client, owner):
    client.force_login(owner)
    old = imported(owner)
    reply = old.append_message("assistant", [{"type": "text", "text": "## Goal\n" + PAYLOADS[5]}], data={"purpose": "handoff"})  # fmt: skip
    from sessions import coverage

    report = coverage.coverage(store.get_branch(old), "nothing", old.cwd)
    addendum = handoff.also_carried_over(
        report.salient_dropped or report.dropped_below_bar(), len(report.items)
    )
    new = handoff.new_session(old, from_entry=reply, content=handoff.wrap(f"## Goal\n{PAYLOADS[0]}\n\n{addendum}"), data={"warnings": PAYLOADS[:3]})  # fmt: skip
    html = client.get(reverse("chat:compare", args=[old.pk, new.pk])).content.decode()
    assert "What the handoff carried" in html
    assert_inert(html)
    assert_inert(client.get(new.get_absolute_url()).content.decode())


def test_exports_are_downloads_the_browser_does_not_render(client, owner):
    client.force_login(owner)
    session = gallery(owner)
    for name, content_type in (
        ("chat:export_md", "text/markdown"),
        ("chat:export_jsonl", "application/x-ndjson"),
    ):
        response = client.get(reverse(name, args=[session.pk]))
        assert response["Content-Type"].startswith(content_type)
        assert response["Content-Disposition"].startswith("attachment;")
        assert response["X-Content-Type-Options"] == "nosniff"


def test_an_entry_with_a_payload_in_its_custom_type_renders_inert(owner):
    session = make_session(owner, model="local")
    for payload in PAYLOADS:
        entry = session.append_custom(payload, payload, data={"part": payload, "parts": payload})
        assert_inert(partials.entry(entry))
        notes = Entry(pk=1, kind="custom", custom_type="handoff_notes", content=[{"type": "text", "text": payload}], data={"part": payload, "parts": payload, "round": 2})  # fmt: skip
        assert_inert(partials.entry(notes))
