"""Pages: sign-in, the session list, a session, lineage links, side by side, preferences."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions import handoff, store
from sessions.models import ChatSession, Preferences

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of(client):
    def sign_in(user):
        client.force_login(user)
        return client

    return sign_in


def handed_off(owner, *, warnings=()):
    old = make_session(owner, exchanges=2)
    old.context_tokens = 12_345
    old.save()
    reply = store.get_branch(old)[-1]
    new = handoff.new_session(
        old,
        from_entry=reply,
        content=handoff.wrap("## Goal\nShip it."),
        data={
            "warnings": list(warnings),
            "context_tokens_before": 12_345,
            "context_tokens_after": 40,
        },
    )
    return old, new


@pytest.mark.parametrize("url", ["/", "/sessions/1/", "/sessions/1/compare/2/", "/preferences/"])
def test_every_page_requires_sign_in(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_login_page_has_the_fields_outside_tools_use(client):
    html = client.get("/accounts/login/").content.decode()
    assert 'name="username"' in html and 'name="password"' in html


def test_the_list_shows_only_my_sessions_newest_first(client_of, owner, other_user):
    mine_old = make_session(owner)
    mine_old.append_message("user", [{"type": "text", "text": "older work"}])
    mine_new = make_session(owner)
    mine_new.append_message("user", [{"type": "text", "text": "newer work"}])
    theirs = make_session(other_user)
    theirs.append_message("user", [{"type": "text", "text": "secret work"}])
    html = client_of(owner).get("/").content.decode()
    assert "New session" in html
    assert html.index("newer work") < html.index("older work")
    assert "secret work" not in html


def test_new_session_creates_one_with_the_configured_model(client_of, owner, settings):
    settings.AGENTWEB_MODEL = "local"
    response = client_of(owner).post(reverse("chat:new"))
    session = ChatSession.objects.get(owner=owner)
    assert response["Location"] == f"/sessions/{session.pk}/"
    assert session.model == "local"


def test_a_session_page_has_the_transcript_box_and_status(client_of, owner):
    session = make_session(owner, model="local", exchanges=1)
    html = client_of(owner).get(session.get_absolute_url()).content.decode()
    assert '<label for="message">Message</label>' in html
    assert f'ws-connect="/ws/sessions/{session.pk}/?after=' in html
    assert "question 0" in html and "answer 0" in html
    assert "Offline model (local)" in html
    assert "/handoff" in html and "[focus instructions]" in html


def test_another_users_session_and_compare_are_not_found(client_of, owner, other_user):
    old, new = handed_off(other_user)
    client = client_of(owner)
    assert client.get(old.get_absolute_url()).status_code == 404
    assert client.get(reverse("chat:compare", args=[old.pk, new.pk])).status_code == 404


def test_lineage_links_both_ways_with_side_by_side(client_of, owner):
    old, new = handed_off(owner)
    client = client_of(owner)
    new_html = client.get(new.get_absolute_url()).content.decode()
    assert "Handed off from" in new_html and f'href="/sessions/{old.pk}/"' in new_html
    compare_url = reverse("chat:compare", args=[old.pk, new.pk])
    assert f'href="{compare_url}">Side by side' in new_html
    old_html = client.get(old.get_absolute_url()).content.decode()
    assert "Continued in" in old_html and f'href="/sessions/{new.pk}/"' in old_html
    assert f'href="{compare_url}">Side by side' in old_html


def test_the_new_session_shows_the_handoff_message_and_both_context_figures(client_of, owner):
    _, new = handed_off(owner, warnings=["Missing section: Progress"])
    html = client_of(owner).get(new.get_absolute_url()).content.decode()
    assert "New session started with handoff context" in html
    assert "Ship it." in html
    assert "Missing section: Progress" in html
    # The handoff message alone: 161 bytes of UTF-8 at three bytes a token.
    assert "Context: 54 tokens (0% of 200,000)" in html
    assert "was 12,345 before handoff" in html


def test_side_by_side_shows_the_older_session_on_the_left(client_of, owner):
    old, new = handed_off(owner)
    html = client_of(owner).get(reverse("chat:compare", args=[new.pk, old.pk])).content.decode()
    assert html.index(f"(#{old.pk})") < html.index(f"(#{new.pk})")
    assert "question 0" in html and "Ship it." in html


def test_the_review_preference_is_saved(client_of, owner):
    client = client_of(owner)
    assert client.get("/preferences/").status_code == 200
    client.post("/preferences/", {"review_handoff": "on"})
    assert Preferences.objects.get(user=owner).review_handoff is True


def test_the_automatic_handoff_and_amendment_preferences_are_saved_and_checked(client_of, owner):
    client = client_of(owner)
    page = client.get("/preferences/").content.decode()
    assert "Hand off automatically at this share of the context window (%)" in page
    client.post("/preferences/", {"auto_handoff_at": "85", "amend_handoff": "on"})
    prefs = Preferences.objects.get(user=owner)
    assert (prefs.auto_handoff_at, prefs.amend_handoff) == (85, True)
    refused = client.post("/preferences/", {"auto_handoff_at": "3"}).content.decode()
    assert "Ensure this value is greater than or equal to 10." in refused
    assert Preferences.objects.get(user=owner).auto_handoff_at == 85


def test_first_run_creates_an_account_and_says_how_to_sign_in(tmp_path, monkeypatch):
    from io import StringIO

    from django.contrib.auth.models import User
    from django.core.management import call_command

    from sessions.management.commands import first_run

    monkeypatch.setattr(first_run, "CREDENTIALS", tmp_path / "credentials")
    out = StringIO()
    call_command("first_run", url="http://127.0.0.1:8000/", stdout=out)
    password = (tmp_path / "credentials").read_text().split("\n")[1]
    assert "http://127.0.0.1:8000/accounts/login/" in out.getvalue()
    assert f"'{password}'" in out.getvalue()
    assert User.objects.get(username="admin").check_password(password)
    assert (tmp_path / "credentials").stat().st_mode & 0o777 == 0o600
    again = StringIO()
    call_command("first_run", url="http://127.0.0.1:8000/", stdout=again)
    assert password not in again.getvalue()  # printed once, when the account was made
    assert "its password is in credentials" in again.getvalue()


def test_a_long_session_shows_its_latest_entries_and_loads_earlier_ones_on_demand(client_of, owner):
    session = make_session(owner)
    for i in range(225):  # 450 entries
        session.append_message("user", [{"type": "text", "text": f"q{i}"}])
        session.append_message("assistant", [{"type": "text", "text": f"a{i}"}])
    client = client_of(owner)
    html = client.get(session.get_absolute_url()).content.decode()
    assert html.count('<article id="entry-') == 200
    assert ">q224<" in html and ">q124<" not in html
    assert "Show 250 earlier entries" in html
    branch = store.get_branch(session)
    first_shown = branch[250].pk
    earlier = client.get(
        reverse("chat:earlier", args=[session.pk]), {"before": first_shown}
    ).content.decode()
    assert earlier.count('<article id="entry-') == 200 and "Show 50 earlier entries" in earlier
    assert (
        f'id="entry-{branch[50].pk}"' in earlier and f'id="entry-{branch[250].pk}"' not in earlier
    )
    first = client.get(
        reverse("chat:earlier", args=[session.pk]), {"before": branch[50].pk}
    ).content.decode()
    assert first.count('<article id="entry-') == 50 and "earlier entr" not in first


def test_earlier_entries_of_another_users_session_are_not_found(client_of, owner, other_user):
    theirs = make_session(other_user, exchanges=1)
    assert client_of(owner).get(reverse("chat:earlier", args=[theirs.pk])).status_code == 404


def test_the_status_line_shows_the_share_of_the_window_and_suggests_a_handoff_from_80_percent(
    client_of, owner
):
    session = make_session(owner, model="local", exchanges=1)
    client = client_of(owner)
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=150_000)
    page = client.get(session.get_absolute_url()).content.decode()
    assert "Context: 150,000 tokens (75% of 200,000)" in page
    assert "to continue in a fresh session" not in page
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=170_000)
    page = client.get(session.get_absolute_url()).content.decode()
    assert (
        "The context is 85% full: type <code>/handoff</code> to continue in a fresh session."
        in page
    )


def test_the_session_page_costs_the_same_queries_for_ten_or_ten_thousand_entries(client_of, owner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_of(owner)
    counts = []
    for size in (10, 3_000):
        session = make_session(owner, exchanges=size // 2)
        client.get(session.get_absolute_url())
        with CaptureQueriesContext(connection) as queries:
            assert client.get(session.get_absolute_url()).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_sidebar_beside_a_session_reads_no_entry_of_the_sessions_it_lists(client_of, owner):
    """It shows titles and parts, not counts: counting read every entry of every session it
    listed, 100-135 ms beside 15 sessions of 10,000 entries, on every session's page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions import listing

    others = [make_session(owner, exchanges=3) for _ in range(3)]
    session = make_session(owner, exchanges=2)
    with CaptureQueriesContext(connection) as queries:
        chains = listing.recent_chains(owner, session)
    assert {chain.newest.pk for chain in chains} == {s.pk for s in [*others, session]}
    assert [q["sql"] for q in queries if "chat_entry" in q["sql"]] == []
    page = client_of(owner).get("/").content.decode()
    assert "6 messages" in page  # the list still counts them


@pytest.mark.django_db
def test_the_list_says_relative_times_as_the_page_keeps_them(client, owner):
    from datetime import timedelta

    from django.utils import timezone

    old = make_session(owner, exchanges=1)
    recent = make_session(owner, exchanges=1)
    ChatSession.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=400))
    ChatSession.objects.filter(pk=recent.pk).update(updated_at=timezone.now() - timedelta(hours=26))
    client.force_login(owner)
    page = client.get("/").content.decode()
    assert "data-relative>1 year ago</time>" in page and "last year" not in page
    assert "data-relative>1 day ago</time>" in page and "hours ago" not in page


@pytest.mark.django_db
def test_a_relative_time_gives_its_full_date_to_the_minute_on_hover(client, owner):
    from datetime import UTC, datetime

    moments = [datetime(2026, 12, 4, 9, 41, s, tzinfo=UTC) for s in (5, 50)]
    moments.append(datetime(2026, 12, 4, 9, 42, 10, tzinfo=UTC))
    for moment in moments:
        session = make_session(owner, exchanges=1)
        ChatSession.objects.filter(pk=session.pk).update(updated_at=moment)
    client.force_login(owner)
    page = client.get("/").content.decode()
    assert page.count('title="4 Dec 2026, 09:41" data-relative>') == 2
    assert page.count('title="4 Dec 2026, 09:42" data-relative>') == 1
    assert '<time datetime="2026-12-04T09:41:50+00:00"' in page


@pytest.mark.django_db
def test_the_favicon_is_served_to_anyone(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.url.endswith("favicon.svg")
    assert (
        '<link rel="icon" href="/static/favicon.svg"'
        in client.get("/accounts/login/").content.decode()
    )
