"""The sidebar (issue 56, item 5): the recent sessions under Pinned, Today, Yesterday, Previous
7 days and Older, each with a menu (Rename, Share, Pin, Archive, Delete); live: a new title, a
rename, a session deleted or pinned reach every tab of the owner's, whatever session it shows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions.models import ChatSession

from .conftest import db_async, make_session

SIDEBAR_PUSH = '<div id="sidebar-items" hx-swap-oob="true">'


def titled(owner, title: str, *, days_ago: int = 0, pinned: bool = False) -> ChatSession:
    session = make_session(owner, exchanges=1)
    when = timezone.now() - timedelta(days=days_ago)
    ChatSession.objects.filter(pk=session.pk).update(title=title, updated_at=when, pinned=pinned)
    return ChatSession.objects.get(pk=session.pk)


@pytest.mark.django_db
def test_the_sidebar_groups_sessions_by_day_with_pinned_first(owner):
    titled(owner, "Ancient audit", days_ago=40)
    titled(owner, "Tuesday refactor", days_ago=4)
    titled(owner, "Yesterday's bug", days_ago=1)
    titled(owner, "Pinned runbook", days_ago=90, pinned=True)
    here = titled(owner, "Today's plan")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/sessions/{here.pk}/").content.decode()
    sidebar = page[page.index('<aside id="sidebar"') : page.index("</aside>")]
    found = re.findall(
        r'<h2 class="sidebar-group">([^<]+)</h2>|<a href="/sessions/\d+/"[^>]*>([^<]+)</a>', sidebar
    )
    assert [heading or title for heading, title in found] == [
        "Pinned", "Pinned runbook",
        "Today", "Today&#x27;s plan",
        "Yesterday", "Yesterday&#x27;s bug",
        "Previous 7 days", "Tuesday refactor",
        "Older", "Ancient audit",
    ]  # fmt: skip
    assert '<label for="sidebar-filter" class="visually-hidden">Filter sessions</label>' in sidebar
    menu = sidebar[sidebar.index('aria-label="Actions for Tuesday refactor"') :]
    menu = menu[: menu.index("</details>")]
    for action in (
        ">Rename</a>",
        ">Share</a>",
        ">Pin</button>",
        ">Archive</button>",
        ">Delete</button>",
    ):
        assert action in menu


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_rename_elsewhere_reaches_every_tab_of_the_owner_and_no_one_elses(
    owner, other_user, open_tab
):
    shown = await db_async(titled)(owner, "The one on screen")
    renamed = await db_async(titled)(owner, "Old name")
    _, tab = await open_tab(owner, shown)
    strangers = await db_async(make_session)(other_user, exchanges=1)
    _, stranger = await open_tab(other_user, strangers)
    client = Client()
    await db_async(client.force_login)(owner)
    await db_async(client.post)(f"/sessions/{renamed.pk}/rename/", {"title": "Quarterly numbers"})
    pushed = await tab.until(SIDEBAR_PUSH)
    sidebar = pushed[pushed.index(SIDEBAR_PUSH) :]
    assert ">Quarterly numbers</a>" in sidebar and ">The one on screen</a>" in sidebar
    assert "Quarterly numbers" not in "".join(stranger.received) + await _quiet(stranger)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_deleted_session_leaves_every_tabs_sidebar(owner, open_tab):
    shown = await db_async(titled)(owner, "Staying")
    doomed = await db_async(titled)(owner, "Going away")
    _, tab = await open_tab(owner, shown)
    client = Client()
    await db_async(client.force_login)(owner)
    await db_async(client.post)(f"/sessions/{doomed.pk}/delete/")
    pushed = await tab.until(SIDEBAR_PUSH)
    sidebar = pushed[pushed.index(SIDEBAR_PUSH) :]
    assert ">Staying</a>" in sidebar and "Going away" not in sidebar


async def _quiet(tab) -> str:
    """What the tab receives in the next half second (nothing, for a tab that is not told)."""
    try:
        return await tab.receive(timeout=0.5)
    except TimeoutError:
        return ""
