"""Attachments (issue 56, item 1): a file goes with a message — an image or a PDF reaches Claude
as the API's own block, a text file as text — kept on the storage, given back to its owner only;
what agentweb cannot take, or what lies about itself, is refused in words."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sessions import generation, search
from sessions.models import Attachment, ChatSession, Entry

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .files import pdf_bomb, pdf_saying, png


def attach(user: User, session: ChatSession, name: str, data: bytes, kind: str = "") -> Client:
    client = Client()
    client.force_login(user)
    upload = SimpleUploadedFile(name, data, content_type=kind or "application/octet-stream")
    client.response = client.post(f"/sessions/{session.pk}/attach/", {"file": upload})  # type: ignore[attr-defined]
    return client


def attached(user: User, session: ChatSession, name: str, data: bytes, kind: str = "") -> int:
    response = attach(user, session, name, data, kind).response  # type: ignore[attr-defined]
    assert response.status_code == 201, response.content.decode()
    return Attachment.objects.get(name=name, owner=user).pk


def refusal(user: User, session: ChatSession, name: str, data: bytes, kind: str = "") -> str:
    response = attach(user, session, name, data, kind).response  # type: ignore[attr-defined]
    assert response.status_code == 400
    return response.content.decode()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_image_reaches_claude_as_an_image_block_after_the_line_that_names_it(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text("A teal rectangle."))
    session = await db_async(make_session)(owner)
    image = png(40, 30)
    file_id = await db_async(attached)(owner, session, "shot.png", image, "image/png")
    _, tab = await open_tab(owner, session)
    await tab.send(message="What is in this picture?", attachments=str(file_id))
    await tab.until("A teal rectangle.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"]
    assert sent[0] == {
        "type": "text",
        "text": f"[Attached image: shot.png (image/png, 40×30 px, {len(image)} bytes)]",
    }
    assert sent[1] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(image).decode(),
        },
    }
    assert sent[2]["text"] == "What is in this picture?"
    # The page shows the image, which opens full size, from the owner's own URL.
    page = await db_async(_page)(owner, session)
    assert f'<a class="attached-image" href="/files/{file_id}/shot.png" target="_blank"' in page
    assert f'<img src="/files/{file_id}/shot.png" alt="shot.png" loading="lazy"' in page


def _page(user: User, session: ChatSession) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/sessions/{session.pk}/").content.decode()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_pdf_reaches_claude_as_a_document_block_and_its_text_is_searchable(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text("Read it."), Reply.text("Again."))
    session = await db_async(make_session)(owner)
    document = pdf_saying("Quarterly figures for the Zanzibar office")
    file_id = await db_async(attached)(owner, session, "report.pdf", document)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Summarise it.", attachments=str(file_id))
    await tab.until("Read it.</p>")
    await tab.send(message="And now?")  # the next request still carries it
    await tab.until("Again.</p>")
    await generation.wait_idle()
    for request in fake_anthropic.requests:
        first = request["json"]["messages"][0]["content"]
        assert first[0]["text"].startswith("[Attached PDF: report.pdf (application/pdf, 1 page, ")
        assert first[1]["type"] == "document"
        assert first[1]["source"]["media_type"] == "application/pdf"
        assert base64.b64decode(first[1]["source"]["data"]) == document
    [hit] = await db_async(search.find)(owner, "Zanzibar")
    assert hit.session.pk == session.pk


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_text_file_is_sent_as_text(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Seen the notes."))
    session = await db_async(make_session)(owner)
    notes = b"deploy on Friday\nport 8443\n"
    file_id = await db_async(attached)(owner, session, "notes.txt", notes, "text/plain")
    _, tab = await open_tab(owner, session)
    await tab.send(message="", attachments=str(file_id))  # a file alone is a message
    await tab.until("Seen the notes.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"]
    assert sent == [
        {
            "type": "text",
            "text": "[Attached file: notes.txt (text/plain, 27 bytes)]\n"
            '<file name="notes.txt">\ndeploy on Friday\nport 8443\n\n</file>',
        }
    ]
    title = await db_async(lambda: ChatSession.objects.get(pk=session.pk).title)()
    assert title == "notes.txt"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_offline_model_says_what_it_was_given(owner, open_tab):
    session = await db_async(make_session)(owner, model="local")
    file_id = await db_async(attached)(owner, session, "cat.png", png(10, 10), "image/png")
    _, tab = await open_tab(owner, session)
    await tab.send(message="Look at my cat", attachments=str(file_id))
    said = await tab.until("You attached 1 file:")
    assert "cat.png (image/png, 10×10 px, " in said


@pytest.mark.django_db
def test_a_file_over_the_limit_is_refused_with_its_size(owner, settings):
    settings.AGENTWEB_MAX_ATTACHMENT_BYTES = 1000
    said = refusal(owner, make_session(owner), "big.txt", b"a" * 1500, "text/plain")
    assert "“big.txt” is 1.5\xa0KB: an attachment may be at most 1000\xa0bytes." in said
    assert not Attachment.objects.exists()


@pytest.mark.django_db
def test_a_file_whose_type_lies_is_refused(owner):
    session = make_session(owner)
    said = refusal(owner, session, "cat.png", b"<html><script>alert(1)</script></html>")
    assert "“cat.png” is not a PNG image: its contents say otherwise." in said
    said = refusal(owner, session, "invoice", b"MZ\x90\x00\x03", "application/pdf")
    assert "“invoice” is not a PDF: its contents say otherwise." in said
    said = refusal(owner, session, "tool.exe", b"MZ\x90\x00\x03\x00\x00\x00")
    assert (
        "“tool.exe” cannot be attached: agentweb takes images (PNG, JPEG, GIF, WebP), PDFs and "
        "text files." in said
    )
    assert not Attachment.objects.exists()


@pytest.mark.django_db
def test_an_svg_with_script_is_never_served_inline(owner):
    session = make_session(owner)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>'
    file_id = attached(owner, session, "logo.svg", svg, "image/svg+xml")
    client = Client()
    client.force_login(owner)
    served = client.get(f"/files/{file_id}/logo.svg")
    assert served.status_code == 200
    assert served["Content-Type"] == "application/octet-stream"
    assert served["Content-Disposition"] == 'attachment; filename="logo.svg"'
    assert served["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in served["Content-Security-Policy"]
    assert b"".join(served.streaming_content) == svg  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_a_pdf_bomb_is_refused_and_the_server_goes_on(owner):
    session = make_session(owner)
    said = refusal(owner, session, "bomb.pdf", pdf_bomb(), "application/pdf")
    assert "“bomb.pdf” cannot be attached: it unpacks to more than agentweb reads." in said
    assert attached(owner, session, "fine.pdf", pdf_saying("fine"))  # the next one is taken


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_another_users_file_is_neither_served_nor_sent(
    owner, other_user, fake_anthropic, open_tab
):
    theirs = await db_async(make_session)(other_user)
    file_id = await db_async(attached)(other_user, theirs, "secret.png", png(), "image/png")
    client = Client()
    await db_async(client.force_login)(owner)
    served = await db_async(client.get)(f"/files/{file_id}/secret.png")
    assert served.status_code == 404
    mine = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, mine)
    await tab.send(message="What is this?", attachments=str(file_id))
    said = await tab.until("not yours")
    assert "An attached file was not found (removed, or not yours): attach it again." in said
    assert "What is this?" in said  # the words go back to the box
    assert not fake_anthropic.requests
    assert not await db_async(Entry.objects.filter(session=mine).exists)()


@pytest.mark.django_db
def test_an_image_counts_in_the_context_as_the_api_counts_it(owner):
    session = make_session(owner)
    file_id = attached(owner, session, "square.png", png(1000, 1000), "image/png")
    entry = session.append_message("user", [_stored(file_id), {"type": "text", "text": "hi"}])
    # The Messages API's table: a 1000×1000 image is about 1,334 tokens ("hi" is one more).
    assert entry.context_added == 1335
    session.refresh_from_db()
    assert session.context_tokens == 1335


def test_a_frame_names_at_most_ten_files():
    from sessions.forms import FrameError, parse_frame

    frame = parse_frame(json.dumps({"message": "", "attachments": "3,4"}))
    assert frame.attachments == (3, 4)
    with pytest.raises(FrameError, match="at most 10 attached file ids"):
        parse_frame(json.dumps({"message": "x", "attachments": ",".join(["1"] * 11)}))


@pytest.mark.django_db
def test_the_export_writes_an_image_as_the_reference_agents_block_and_the_import_reads_it_back(
    owner, other_user
):
    session = make_session(owner, model="local")
    image = png(12, 8, "orange")
    file_id = attached(owner, session, "chart.png", image, "image/png")
    session.append_message("user", [_stored(file_id), {"type": "text", "text": "the chart"}])
    client = Client()
    client.force_login(owner)
    exported = b"".join(client.get(f"/sessions/{session.pk}/export.jsonl").streaming_content)
    [line] = [json.loads(text) for text in exported.decode().splitlines()[1:]]
    assert line["message"]["content"] == [
        {"type": "image", "data": base64.b64encode(image).decode(), "mimeType": "image/png"},
        {"type": "text", "text": "the chart"},
    ]
    # Another user imports the file: the image is a file of theirs, shown and sent as one.
    theirs = Client()
    theirs.force_login(other_user)
    upload = SimpleUploadedFile("chart.jsonl", exported, content_type="application/jsonl")
    opened = theirs.post("/sessions/import/", {"file": upload})
    assert opened.status_code == 302, opened.content.decode()
    kept = Attachment.objects.get(owner=other_user)
    assert (kept.media_type, kept.width, kept.height, kept.size) == ("image/png", 12, 8, len(image))
    page = theirs.get(opened["Location"]).content.decode()
    assert f'<img src="/files/{kept.pk}/image.png" alt="image.png"' in page


def _stored(file_id: int) -> dict[str, object]:
    from sessions.attachments import stored_block

    return stored_block(Attachment.objects.get(pk=file_id))


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_message_queued_behind_a_reply_keeps_its_files(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.held(["Working"]), Reply.text("Looked at it."))
    session = await db_async(make_session)(owner)
    file_id = await db_async(attached)(owner, session, "later.png", png(), "image/png")
    _, tab = await open_tab(owner, session)
    await tab.send(message="first")
    assert await asyncio.to_thread(fake_anthropic.wait_for_hold)
    await tab.send(message="and this picture", attachments=str(file_id))
    queued = await tab.until("and this picture</span>")  # queued, its file said
    assert 'and this picture</span> <span class="muted small">with 1 file</span>' in queued
    fake_anthropic.release()
    await tab.until("Looked at it.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[1]["json"]["messages"][-1]["content"]
    assert [block["type"] for block in sent] == ["text", "image", "text"]
    assert sent[0]["text"].startswith("[Attached image: later.png (image/png, 40×30 px, ")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_edited_message_keeps_its_files(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("One."), Reply.text("Two."))
    session = await db_async(make_session)(owner)
    file_id = await db_async(attached)(owner, session, "plan.txt", b"step one", "text/plain")
    _, tab = await open_tab(owner, session)
    await tab.send(message="Read the plan", attachments=str(file_id))
    await tab.until("One.</p>")
    await generation.wait_idle()
    asked = await db_async(lambda: Entry.objects.get(session=session, role="user").pk)()
    await tab.send(action="edit", entry=asked, message="Read the plan twice")
    await tab.until("Two.</p>")
    await generation.wait_idle()
    sent = fake_anthropic.requests[1]["json"]["messages"][-1]["content"]
    assert sent[0]["text"].startswith("[Attached file: plan.txt (text/plain, 8 bytes)]")
    assert sent[-1]["text"] == "Read the plan twice"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_handoff_reads_a_file_as_its_name_and_text(owner, fake_anthropic, open_tab):
    from .test_handoff import DOCUMENT, redirected_session

    fake_anthropic.enqueue(Reply.text("Noted the budget."), Reply.text(DOCUMENT))
    session = await db_async(make_session)(owner, exchanges=1)
    document = pdf_saying("Budget ceiling 48000 EUR")
    file_id = await db_async(attached)(owner, session, "budget.pdf", document)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Keep to this budget.", attachments=str(file_id))
    await tab.until("Noted the budget.</p>")
    await tab.send(message="/handoff")
    redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    request = json.dumps(fake_anthropic.requests[1]["json"], ensure_ascii=False)
    assert "[Attached PDF: budget.pdf (application/pdf, 1 page, " in request
    assert "Budget ceiling 48000 EUR" in request


@pytest.mark.django_db
def test_a_purged_sessions_files_leave_the_storage_and_copy_gives_only_the_words(owner):
    session = make_session(owner)
    file_id = attached(owner, session, "gone.png", png(), "image/png")
    entry = session.append_message("user", [_stored(file_id), {"type": "text", "text": "see"}])
    client = Client()
    client.force_login(owner)
    copied = client.get(f"/sessions/{session.pk}/entries/{entry.pk}/markdown/")
    assert copied.content.decode() == "see"
    path = Attachment.objects.get(pk=file_id).path
    from sessions.attachments import storage

    assert storage().exists(path)
    session.delete()
    assert not Attachment.objects.exists()
    assert not storage().exists(path)
