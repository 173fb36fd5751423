"""Share links (issue 56, item 3): Share → Create link makes an unguessable read-only link to a
snapshot of the session (or of its chain, with its handoff documents); a signed-out visitor
reads it with no message box and no owner controls; a signed-in one can continue it as a copy;
revoked or unknown, it answers 404; no link reveals another session's title."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from sessions.models import ChatSession, ShareLink

from .conftest import linear_session, make_session

pytestmark = pytest.mark.django_db


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shared_path(owner: User, session: ChatSession, **fields: str) -> str:
    """The path of a new link, as the Share dialog shows it in its read-only field."""
    dialog = signed_in(owner).post(
        f"/sessions/{session.pk}/share/", fields, headers={"HX-Request": "true"}
    )
    field = r'<input type="text" id="share-url" readonly value="http://testserver(/share/[^"]+)"'
    found = re.search(field, dialog.content.decode())
    assert found, dialog.content.decode()
    return found.group(1)


def test_a_signed_out_visitor_reads_the_session_without_a_message_box(owner):
    session = linear_session(owner, ["How do I rotate the logs?", "Use logrotate weekly."])
    path = shared_path(owner, session)
    assert re.fullmatch(r"/share/[A-Za-z0-9_-]{32}/", path)  # 192 random bits
    page = Client().get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert "How do I rotate the logs?" in html and "Use logrotate weekly." in html
    assert "Shared by <strong>owner</strong> on " in html
    assert 'id="message"' not in html  # no message box
    for control in ("Regenerate", "Fork", ">Edit<", "Rename", "Delete", "Copy text"):
        assert control not in html
    assert "Continue in my account" not in html  # signed out: offered a sign-in instead
    assert ">Sign in</a> to continue it in your account." in html
    assert page["Referrer-Policy"] == "no-referrer"


def test_later_messages_are_not_in_the_snapshot(owner):
    session = linear_session(owner, ["first question", "first answer"])
    path = shared_path(owner, session)
    session.append_message("user", [{"type": "text", "text": "a later secret"}])
    assert "a later secret" not in Client().get(path).content.decode()


def test_a_revoked_or_unknown_link_answers_404(owner):
    session = linear_session(owner, ["q", "a"])
    path = shared_path(owner, session)
    link = ShareLink.objects.get()
    dialog = signed_in(owner).post(
        f"/sessions/{session.pk}/share/", {"revoke": link.pk}, headers={"HX-Request": "true"}
    )
    assert "Create link" in dialog.content.decode()
    assert Client().get(path).status_code == 404
    assert Client().get("/share/not-a-real-token/").status_code == 404


def test_another_user_can_neither_share_nor_revoke_my_session(owner, other_user):
    session = linear_session(owner, ["q", "a"])
    path = shared_path(owner, session)
    intruder = signed_in(other_user)
    assert intruder.post(f"/sessions/{session.pk}/share/", {}).status_code == 404
    link = ShareLink.objects.get()
    intruder.post(f"/shared-links/{link.pk}/revoke/")
    assert Client().get(path).status_code == 200  # still in force


def test_a_mention_of_another_session_leaks_no_title(owner):
    secret = make_session(owner)
    secret.title = "Acquisition of Initech"
    secret.save()
    session = linear_session(owner, ["hello", "hi"])
    session.append_message(
        "user",
        [{"type": "text", "text": f"compare with @#{secret.pk}"}],
        data={"mentions": [{"session": secret.pk, "title": "Acquisition of Initech"}]},
    )
    html = Client().get(shared_path(owner, session)).content.decode()
    assert f"compare with @#{secret.pk}" in html
    assert "Initech" not in html
    assert f"/sessions/{secret.pk}/" not in html


def test_a_chain_shares_every_session_and_its_handoff_documents(owner):
    old = linear_session(owner, ["Plan the migration", "Step one: dump the schema."])
    document = "## Goal\nFinish the migration of the billing schema."
    seed = {"kind": "message", "role": "user", "content": [{"type": "text", "text": document}]}
    new = old.hand_off(from_entry=old.entries.last(), seed=[seed])
    new.rename("Migration, part 2")
    html = Client().get(shared_path(owner, new, chain="on")).content.decode()
    assert "Step one: dump the schema." in html
    assert "Finish the migration of the billing schema." in html
    assert '<nav class="shared-map" aria-label="Lineage map">' in html
    assert "Part 2: Migration, part 2" in html
    # Shared alone, the later session shows only itself.
    alone = Client().get(shared_path(owner, new)).content.decode()
    assert "Step one: dump the schema." not in alone


def test_continue_in_my_account_makes_a_copy_of_the_viewers_own(owner, other_user):
    session = linear_session(owner, ["What is 6 × 7?", "42."])
    path = shared_path(owner, session)
    viewer = signed_in(other_user)
    assert "Continue in my account" in viewer.get(path).content.decode()
    copied = viewer.post(f"{path}continue/")
    copy = ChatSession.objects.get(owner=other_user)
    assert copied["Location"] == f"/sessions/{copy.pk}/"
    page = viewer.get(copied["Location"]).content.decode()
    assert "What is 6 × 7?" in page and "42." in page
    assert copy.forked_from_id is None  # the owner's session stays out of the viewer's reach


def test_the_owner_lists_their_links_with_dates_and_view_counts(owner):
    session = linear_session(owner, ["q", "a"])
    session.title = "Log rotation"
    session.save()
    path = shared_path(owner, session)
    for _ in range(3):
        Client().get(path)
    page = signed_in(owner).get("/preferences/").content.decode()
    assert '<h2 id="shared-links-title">Shared links</h2>' in page
    row = page[page.index("Log rotation</a>") :]
    assert re.search(r"<td>3 <span class=\"muted small\">last ", row)
    assert 'aria-label="Revoke the link to Log rotation">Revoke</button>' in row


def test_the_list_shares_a_whole_chain(owner):
    old = linear_session(owner, ["Plan the migration", "Step one."])
    seed = {"kind": "message", "role": "user", "content": [{"type": "text", "text": "## Goal"}]}
    new = old.hand_off(from_entry=old.entries.last(), seed=[seed])
    client = signed_in(owner)
    listed = client.get("/").content.decode()
    assert f'<form method="post" action="/sessions/{new.pk}/share/">' in listed
    assert ">Share the chain</button>" in listed
    made = client.post(f"/sessions/{new.pk}/share/", {"chain": "on"})
    assert made["Location"] == f"/sessions/{new.pk}/#share"  # the dialog opens on the link
    link = ShareLink.objects.get()
    assert link.chain and [part[0] for part in link.parts] == [old.pk, new.pk]


def test_the_files_a_shared_message_shows_are_served_through_the_link_and_no_other(owner):
    from sessions.attachments import stored_block
    from sessions.models import Attachment

    from .files import png
    from .test_attachments import attached

    session = linear_session(owner, ["Look at this"])
    shown = attached(owner, session, "diagram.png", png(20, 10), "image/png")
    other = attached(owner, session, "private.png", png(), "image/png")
    block = stored_block(Attachment.objects.get(pk=shown))
    session.append_message("user", [block, {"type": "text", "text": "the diagram"}])
    path = shared_path(owner, session)
    html = Client().get(path).content.decode()
    assert f'<img src="{path}files/{shown}/diagram.png" alt="diagram.png"' in html
    image = Client().get(f"{path}files/{shown}/diagram.png")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert Client().get(f"{path}files/{other}/private.png").status_code == 404
    ShareLink.objects.update(revoked_at=timezone.now())
    assert Client().get(f"{path}files/{shown}/diagram.png").status_code == 404
