"""A crafted file cannot break a session (issue 18, items 2–4 and 11): the import refuses a
field of the wrong type or range, naming its line and field; entries already stored in a wrong
shape (older versions took them) still show, fork, export and get replies; and a prompt whose
background job fails says so."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from sessions import generation, handoff, mentions, recall, session_file
from sessions.models import ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z"}
ROOT = {
    "type": "message",
    "id": "a",
    "parentId": None,
    "message": {"role": "user", "content": "hi"},
}


def under_root(**line: Any) -> dict[str, Any]:
    return {"id": "b", "parentId": "a", **line}


def todo_result(details: Any) -> dict[str, Any]:
    message = {"role": "toolResult", "toolCallId": "t1", "toolName": "todo_write", "content": "ok"}
    return under_root(type="message", message={**message, "details": details})


def reply_with(usage: dict[str, Any]) -> dict[str, Any]:
    return under_root(type="message", message={"role": "assistant", "content": "x", "usage": usage})


CRAFTED = [
    (under_root(type="custom", customType="todos", data=[1, 2]), "Line 3: the todo list's `data` must be an object holding `todos`."),
    (under_root(type="custom", customType="todos", data="x"), "Line 3: the todo list's `data` must be an object holding `todos`."),
    (under_root(type="custom", customType="todos", data={"todos": "x"}), "Line 3: the todo list's `data` `todos` must be a list of objects."),
    (todo_result("x"), "Line 3: the todo_write result's `details` must be an object holding `todos`."),
    (todo_result([1]), "Line 3: the todo_write result's `details` must be an object holding `todos`."),
    (under_root(type="message", timestamp="0001-01-01T00:00:00+01:00", message={"role": "user", "content": "x"}), "Line 3: `timestamp` '0001-01-01T00:00:00+01:00' is not a possible date and time."),
    (under_root(type="message", timestamp="9999-12-31T23:59:59-01:00", message={"role": "user", "content": "x"}), "Line 3: `timestamp` '9999-12-31T23:59:59-01:00' is not a possible date and time."),
    (reply_with({"input": 10**30}), "Line 3: the message's `usage.input` is larger than 2,147,483,647."),
    (reply_with({"output": 2**63}), "Line 3: the message's `usage.output` is larger than 2,147,483,647."),
    (reply_with({"cacheRead": True}), "Line 3: the message's `usage.cacheRead` must be a whole, non-negative number."),
    (under_root(type="thinking_level_change", thinkingLevel={"a": 1}), "Line 3: `thinkingLevel` must be a string."),
    (under_root(type="custom_message", customType="note", content="x", details=[1]), "Line 3: `details` must be an object."),
    (under_root(type="custom_message", customType="handoff", content="## Goal\nx", details={"warnings": 5}), "Line 3: the handoff's `details`: `warnings` must be a list of strings."),
    (under_root(type="custom_message", customType="handoff", content="## Goal\nx", details={"context_tokens_before": "many"}), "Line 3: the handoff's `details`: `context_tokens_before` must be a whole, non-negative number."),
    (under_root(type="custom_message", customType="note", content="x", display="yes"), "Line 3: `display` must be true or false."),
    (under_root(type="message", message={"role": "toolResult", "toolCallId": 7, "content": "x"}), "Line 3: the message's `toolCallId` must be a string."),
    (under_root(type="compaction", summary="s", tokensBefore=-1, firstKeptEntryId="a"), "Line 3: `tokensBefore` must be a whole, non-negative number."),
]  # fmt: skip


def jsonl(*lines: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(line) for line in lines).encode()


@pytest.fixture
def signed_in(owner) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(("line", "refusal"), CRAFTED)
def test_a_field_of_the_wrong_type_or_range_is_refused_naming_line_and_field(
    signed_in, owner, line, refusal
):
    data = jsonl(HEADER, ROOT, line)
    response = signed_in.post(
        reverse("chat:import"), {"file": SimpleUploadedFile("crafted.jsonl", data)}, follow=True
    )
    assert response.status_code == 200
    assert refusal in html.unescape(response.content.decode())
    assert not ChatSession.objects.filter(owner=owner).exists()


def stored_in_wrong_shapes(owner) -> ChatSession:
    """Entries as older versions of agentweb imported them, before the import checked these."""
    session = make_session(owner, exchanges=1)
    session.append(kind="custom", custom_type="todos", data={"fields": {"data": [1, 2]}})
    session.append(
        kind="message",
        role="toolResult",
        content=[{"type": "text", "text": "ok"}],
        data={"message": {"toolCallId": "t1", "toolName": "todo_write", "details": "x"}},
    )
    session.append(kind="thinking_level_change", data={"fields": {"thinkingLevel": {"a": 1}}})
    session.append(
        kind="custom_message",
        custom_type="note",
        content=[{"type": "text", "text": "a note with odd details"}],
        data={"refs": {"x": [1, [2]]}, "nested": [{"a": [[1]]}]},
    )
    session.append(
        kind="custom_message",
        custom_type="handoff",
        content=[{"type": "text", "text": "## Goal\nShip the odd file."}],
        data={"warnings": 5, "fitted": 7, "coverage": "x", "context_tokens_before": "x"},
    )
    session.append(
        kind="compaction", content=[], data={"fields": {"summary": {"no": 1}}, "refs": 3}
    )
    return session


@pytest.mark.django_db
def test_entries_stored_in_a_wrong_shape_show_fork_and_export(signed_in, owner):
    session = stored_in_wrong_shapes(owner)
    page = signed_in.get(session.get_absolute_url())
    assert page.status_code == 200
    assert "a note with odd details" in page.content.decode()
    assert "Ship the odd file." in page.content.decode()
    fork = signed_in.post(reverse("chat:fork", args=[session.pk]), {"entry": session.leaf_id})
    assert fork.status_code == 302
    forked = ChatSession.objects.exclude(pk=session.pk).get()
    assert signed_in.get(forked.get_absolute_url()).status_code == 200
    for name in ("chat:export_jsonl", "chat:export_md", "chat:tree"):
        response = signed_in.get(reverse(name, args=[session.pk]))
        assert response.status_code == 200, name
    exported = b"".join(signed_in.get(reverse("chat:export_jsonl", args=[forked.pk])))
    assert b'"nested":[{"a":[[1]]}]' in exported


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_session_with_entries_in_a_wrong_shape_still_gets_replies(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text("Still here, and answering."))
    session = await db_async(stored_in_wrong_shapes)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Are you there?")
    await tab.until("Still here, and answering.")
    await generation.wait_idle()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_prompt_whose_job_fails_tells_the_user_and_keeps_the_message(
    owner, fake_anthropic, open_tab, monkeypatch
):
    """The failure is the markdown library's (a fault below agentweb, as a bug there would be)."""
    import markdown_it

    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("the renderer broke")

    fake_anthropic.enqueue(Reply.text("an answer nobody sees"))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    monkeypatch.setattr(markdown_it.MarkdownIt, "render", broken)
    await tab.send(message="Render this")
    html = await tab.until("agentweb failed while answering")
    assert "your message is kept in the session; send it again to retry." in html
    await generation.wait_idle()
    kept = await db_async(lambda: list(Entry.objects.filter(session=session, role="user")))()
    assert [entry.text for entry in kept] == ["Render this"]


@pytest.mark.django_db
def test_a_shown_custom_entry_stays_shown_through_export_import_and_export(signed_in, owner):
    note = under_root(type="custom", customType="note", data={"text": "shown note"}, display=True)
    first = session_file.import_jsonl(owner, jsonl(HEADER, ROOT, note).decode().split("\n"))
    exported = b"".join(signed_in.get(reverse("chat:export_jsonl", args=[first.pk])))
    again = session_file.import_jsonl(owner, exported.decode().split("\n"))
    assert "shown note" in signed_in.get(again.get_absolute_url()).content.decode()
    assert "shown note" in session_file.export_markdown(again)
    last = b"".join(signed_in.get(reverse("chat:export_jsonl", args=[again.pk]))).splitlines()[-1]
    assert json.loads(last)["display"] is True


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_message_the_server_fails_to_take_is_said_and_given_back(owner, open_tab):
    """A real fault below agentweb: the prompt queue's table is gone for a moment."""
    from django.db import connection

    session = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, session)
    await tab.until('id="status"')

    def rename_queue(old: str, new: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")

    await db_async(rename_queue)("chat_pendingprompt", "chat_pendingprompt_away")
    try:
        await tab.send(message="Keep this text")
        said = await tab.until("agentweb failed to take that message")
    finally:
        await db_async(rename_queue)("chat_pendingprompt_away", "chat_pendingprompt")
    assert "it is back in the box; send it again to retry." in said
    assert "Keep this text" in said  # the composer gets it back
    await tab.send(message="/help")  # the socket is still open
    await tab.until("<dd>List the slash commands</dd>")


def imported(signed_in, *lines: dict[str, Any]) -> ChatSession:
    response = signed_in.post(
        reverse("chat:import"),
        {"file": SimpleUploadedFile("crafted.jsonl", jsonl(HEADER, *lines))},
    )
    assert response.status_code == 302, response.content.decode()[:500]
    return ChatSession.objects.order_by("-pk").first()


@pytest.mark.django_db
def test_a_mention_past_any_id_never_breaks_a_lineage_map(signed_in, owner):
    planted = {"mentions": [{"session": 2**63, "title": "x"}, {"session": 2**64}]}
    session = imported(
        signed_in,
        ROOT,
        under_root(type="custom_message", customType="note", content="n", details=planted),
    )
    # And as a message of the user's stored by an older agentweb, in the same shape.
    session.append_message("user", [{"type": "text", "text": "see"}], data=planted)
    reply = session.append_message(
        "assistant", [{"type": "text", "text": "## Goal\nOn."}], data={"purpose": "handoff"}
    )
    child = handoff.new_session(session, from_entry=reply, content="## Goal\nOn.", data={})
    assert (
        signed_in.post(reverse("chat:fork", args=[session.pk]), {"entry": reply.pk}).status_code
        == 302
    )
    fork = ChatSession.objects.get(forked_from=reply)
    for shown in (session, child, fork):
        response = signed_in.get(reverse("chat:map", args=[shown.pk]))
        assert response.status_code == 200, shown
        assert "Lineage map" in response.content.decode()
        assert signed_in.get(shown.get_absolute_url()).status_code == 200


@pytest.mark.django_db
def test_an_imported_file_cannot_plant_a_mention_that_widens_recall(signed_in, owner):
    private = make_session(owner, exchanges=1)
    private.append_message("user", [{"type": "text", "text": "The vault code is 4471."}])
    planted = {"mentions": [{"session": private.pk, "title": "hidden"}]}
    session = imported(
        signed_in,
        ROOT,
        under_root(type="custom_message", customType="note", content="n", details=planted),
    )
    assert not recall.offered(session)
    assert private.pk not in recall.recallable(session)
    with pytest.raises(recall.RecallRefused):
        recall.recall(session, "vault code", only=private.pk)
    # What the user types names a mention, as before.
    session.append_message(
        "user",
        [{"type": "text", "text": f"see @#{private.pk}"}],
        data=mentions.data_of(session, f"see @#{private.pk}"),
    )
    assert private.pk in recall.recallable(session)
