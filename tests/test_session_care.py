"""Session care (issue 11, item 3): titles cut at a word boundary, the sessions of a chain told
apart by their part and date, pin, archive, and delete with undo (one session or a chain)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions import content, handoff, store
from sessions.models import ChatSession, Entry

from .conftest import make_session

pytestmark = pytest.mark.django_db


def test_a_title_is_cut_at_a_word_boundary_with_an_ellipsis():
    text = "Please look at the failing build: the config lives in src/settings.py and the tests"
    title = content.title_from(text)
    assert title == "Please look at the failing build: the config lives in src/settings.py and the…"
    assert len(title) <= content.TITLE_LENGTH


def test_a_short_first_line_is_the_whole_title_and_blank_lines_are_skipped():
    assert content.title_from("\n\n   Fix   the\tlogin  \nsecond line") == "Fix the login"


def test_markdown_marks_at_the_start_of_the_first_line_are_not_part_of_the_title():
    assert content.title_from("## Plan for the migration") == "Plan for the migration"
    assert content.title_from("- [ ] Read the config\n- [x] Install deps") == "Read the config"
    assert content.title_from("> 1. Quoted step") == "Quoted step"
    assert content.title_from("#hashtag stays") == "#hashtag stays"
    assert content.title_from("- ") == "-"  # nothing but marks: kept as written


def test_a_single_word_longer_than_a_title_is_cut_where_it_must():
    title = content.title_from("x" * 300)
    assert title == "x" * (content.TITLE_LENGTH - 1) + "…"


def test_the_first_message_names_the_session_by_whole_words(owner):
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "word " * 40}])
    session.refresh_from_db()
    assert session.title.endswith("word…")
    assert "wor…" not in session.title


def chain_of_three(owner):
    first = make_session(owner, exchanges=1)
    first.append_message("user", [{"type": "text", "text": "Port the parser"}])
    sessions = [first]
    for _ in range(2):
        reply = sessions[-1].append_message("assistant", [{"type": "text", "text": "doc"}])
        sessions.append(handoff.new_session(sessions[-1], from_entry=reply, content="doc", data={}))
    return sessions


def test_the_list_tells_the_sessions_of_a_chain_apart_by_part_and_date(client, owner):
    first, second, third = chain_of_three(owner)
    client.force_login(owner)
    page = client.get("/").content.decode()
    for part, session in enumerate((first, second, third), start=1):
        assert f"part {part} · {session.created_at:%-d %b %Y}" in page


def test_a_later_session_of_a_chain_says_which_part_it_is(client, owner):
    first, second, third = chain_of_three(owner)
    client.force_login(owner)
    assert "part 3 · " in client.get(third.get_absolute_url()).content.decode()
    assert "part 2 · " in client.get(second.get_absolute_url()).content.decode()
    assert "part 1 · " not in client.get(first.get_absolute_url()).content.decode()


def titled(owner, title: str, **fields):
    session = make_session(owner, exchanges=1)
    ChatSession.objects.filter(pk=session.pk).update(title=title, **fields)
    return ChatSession.objects.get(pk=session.pk)


def listed_titles(client, url: str = "/") -> list[str]:
    page = client.get(url).content.decode()
    return re.findall(r'<a href="/sessions/\d+/">([^<]+)</a></span>', page)


def test_a_pinned_session_leads_the_list_until_it_is_unpinned(client, owner):
    client.force_login(owner)
    older = titled(owner, "Older work")
    titled(owner, "Newer work")
    assert listed_titles(client) == ["Newer work", "Older work"]
    response = client.post(f"/sessions/{older.pk}/pin/", {"next": "/"}, follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert "Pinned “Older work” to the top of the list." in response.content.decode()
    assert listed_titles(client) == ["Older work", "Newer work"]
    client.post(f"/sessions/{older.pk}/unpin/")
    assert listed_titles(client) == ["Newer work", "Older work"]


def test_an_archived_session_leaves_the_list_but_search_still_finds_it(client, owner):
    client.force_login(owner)
    session = titled(owner, "Parser port")
    session.append_message("user", [{"type": "text", "text": "the zanzibar config"}])
    client.post(f"/sessions/{session.pk}/archive/")
    assert listed_titles(client) == []
    assert "Archived (1)" in client.get("/").content.decode()
    assert listed_titles(client, "/?archived=1") == ["Parser port"]
    found = client.get("/?q=zanzibar").content.decode()
    assert '<span class="badge">archived</span>' in found
    assert f'href="/sessions/{session.pk}/?at=' in found  # the hit jumps to the entry
    client.post(f"/sessions/{session.pk}/unarchive/")
    assert listed_titles(client) == ["Parser port"]


def test_a_deleted_session_is_gone_from_everywhere_until_it_is_restored(client, owner):
    client.force_login(owner)
    session = titled(owner, "Secret plans")
    session.append_message("user", [{"type": "text", "text": "the zanzibar config"}])
    response = client.post(f"/sessions/{session.pk}/delete/")
    assert response.url == "/"
    page = client.get("/").content.decode()
    assert "Deleted “Secret plans”. You can undo it under Recently deleted." in page
    assert listed_titles(client) == []
    assert client.get(session.get_absolute_url()).status_code == 404
    assert "No session mentions “zanzibar”." in client.get("/?q=zanzibar").content.decode()
    assert store.owned_session(owner, session.pk) is None  # its socket is refused
    assert "Undo delete" in page
    client.post(f"/sessions/{session.pk}/restore/")
    assert listed_titles(client) == ["Secret plans"]
    assert client.get(session.get_absolute_url()).status_code == 200
    assert Entry.objects.filter(session=session).count() == 3


def test_a_deleted_sessions_page_offers_undo_while_it_can_and_undo_brings_it_back(
    client, owner, settings
):
    client.force_login(owner)
    session = titled(owner, "Secret plans")
    client.post(f"/sessions/{session.pk}/delete/")
    page = client.get(session.get_absolute_url())
    assert page.status_code == 404  # not a session page: its words stay out of it
    text = page.content.decode()
    assert "<h1>“Secret plans” was deleted</h1>" in text
    assert f'action="/sessions/{session.pk}/restore/"' in text and "Undo delete</button>" in text
    back = client.post(f"/sessions/{session.pk}/restore/", {"back": "session"})
    assert back.url == session.get_absolute_url()
    assert client.get(back.url).status_code == 200
    # Past the undo time the page is the plain "Not found".
    session.soft_delete()
    ChatSession.objects.filter(pk=session.pk).update(
        deleted_at=timezone.now() - timedelta(seconds=settings.AGENTWEB_UNDO_DELETE_SECONDS + 1)
    )
    assert "Undo delete" not in client.get(session.get_absolute_url()).content.decode()


def test_another_users_deleted_session_offers_no_undo(client, owner, other_user):
    theirs = titled(other_user, "Their plans")
    theirs.soft_delete()
    client.force_login(owner)
    page = client.get(theirs.get_absolute_url())
    assert page.status_code == 404 and b"Their plans" not in page.content


def test_a_whole_chain_is_deleted_and_restored_together(client, owner):
    client.force_login(owner)
    first, second, third = chain_of_three(owner)
    assert "Delete all 3" in client.get("/").content.decode()
    client.post(f"/sessions/{third.pk}/delete-chain/")
    assert "Deleted the 3 sessions of" in client.get("/").content.decode()
    assert ChatSession.objects.filter(deleted_at__isnull=True).count() == 0
    client.post(f"/sessions/{second.pk}/restore/")
    assert ChatSession.objects.filter(deleted_at__isnull=True).count() == 3
    assert "Restored" in client.get("/").content.decode()


def test_after_the_undo_time_a_deleted_session_is_purged_with_its_entries(client, owner, settings):
    client.force_login(owner)
    session = titled(owner, "Old")
    session.soft_delete()
    ChatSession.objects.filter(pk=session.pk).update(
        deleted_at=timezone.now() - timedelta(seconds=settings.AGENTWEB_UNDO_DELETE_SECONDS + 1)
    )
    assert "Recently deleted" not in client.get("/").content.decode()  # the list purges
    assert not ChatSession.objects.filter(pk=session.pk).exists()
    assert not Entry.objects.filter(session_id=session.pk).exists()
    assert client.post(f"/sessions/{session.pk}/restore/").status_code == 404


def test_delete_asks_first_in_the_page(client, owner):
    client.force_login(owner)
    session = titled(owner, "Keep me")
    page = client.get(session.get_absolute_url()).content.decode()
    assert 'data-confirm="Delete this session? You can undo it for a while."' in page
    listed = client.get("/").content.decode()
    assert 'data-confirm="Delete “Keep me”? You can undo it for a while."' in listed


def test_another_users_session_cannot_be_pinned_archived_deleted_or_restored(
    client, owner, other_user
):
    theirs = titled(other_user, "Theirs")
    client.force_login(owner)
    for action in ("pin", "archive", "delete", "delete-chain"):
        assert client.post(f"/sessions/{theirs.pk}/{action}/").status_code == 404
    theirs.soft_delete()
    assert client.post(f"/sessions/{theirs.pk}/restore/").status_code == 404
    assert ChatSession.objects.get(pk=theirs.pk).deleted_at is not None
    assert ChatSession.objects.get(pk=theirs.pk).pinned is False


def test_a_redirect_back_goes_only_to_this_site(client, owner):
    client.force_login(owner)
    session = titled(owner, "Mine")
    response = client.post(f"/sessions/{session.pk}/pin/", {"next": "https://evil.example/"})
    assert response.url == "/"


def test_an_untouched_empty_session_is_not_listed_and_goes_after_a_day(client, owner):
    client.force_login(owner)
    used = make_session(owner, exchanges=1)
    named = make_session(owner)
    named.rename("Plans, empty for now")
    untouched = make_session(owner)
    page = client.get("/").content.decode()
    assert f'href="/sessions/{used.pk}/"' in page and "Plans, empty for now" in page
    assert f'href="/sessions/{untouched.pk}/"' not in page
    # Open, it is in the sidebar beside itself, and nowhere else.
    beside = client.get(untouched.get_absolute_url()).content.decode()
    assert f'href="/sessions/{untouched.pk}/"' in beside

    younger = make_session(owner)
    waiting = make_session(owner)
    waiting.pending_prompts.create(text="queued before its first reply")
    day_ago = timezone.now() - timedelta(days=1, minutes=1)
    ChatSession.objects.filter(pk__in=[untouched.pk, waiting.pk, named.pk]).update(
        updated_at=day_ago
    )
    imported = make_session(owner)  # an empty file imported now, dated by its header long ago
    ChatSession.objects.filter(pk=imported.pk).update(created_at=day_ago - timedelta(days=300))
    client.get("/")  # the list purges
    assert not ChatSession.objects.filter(pk=untouched.pk).exists()
    assert set(ChatSession.objects.values_list("pk", flat=True)) == {
        used.pk, named.pk, younger.pk, waiting.pk, imported.pk,
    }  # fmt: skip
