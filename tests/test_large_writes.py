"""No user stalls another (issue 18, item 1): a large fork is copied, and a large session
purged, in short transactions, so another user's rename and prompt go on meanwhile; a fork
being made is out of sight, forks are capped, and one is made at a time."""

from __future__ import annotations

import io
import json
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from sessions import care, generation, session_file
from sessions.models import BranchRefused, ChatSession, Entry

from .conftest import db_async, linear_session, make_session
from .fake_anthropic import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def long_session(owner, size: int) -> ChatSession:
    text = "Step {i}: edited `src/module_{i}.py`, and the tests passed. " * 3
    return linear_session(owner, [text.format(i=i) for i in range(size)])


class InAThread:
    """A large write under way in another thread (as another request is), watched from the
    test: a fork of `session`, or the import of `lines`."""

    def __init__(self, session: ChatSession | None = None, lines: list[str] | None = None) -> None:
        self.session, self.lines = session, lines
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        from django.db import connection

        try:
            if self.session is not None:
                self.session.fork(self.session.leaf_id or 0)
            else:
                session_file.import_jsonl(User.objects.get(username="owner"), self.lines or [])
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.error = error
        finally:
            self.done.set()
            connection.close()

    def start_and_wait_until_copying(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not Entry.objects.filter(session__building=True).exists():
            assert not self.done.is_set(), "the fork ended before it was seen copying"
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def still_copying(self) -> bool:
        return not self.done.is_set() and ChatSession.objects.filter(building=True).exists()


@pytest.fixture
def batches_of_200(settings):
    settings.AGENTWEB_WRITE_BATCH = 200


def test_another_users_rename_goes_on_while_a_large_fork_is_copied(
    owner, other_user, batches_of_200
):
    session = long_session(owner, 6_000)
    theirs = make_session(other_user)
    bystander = Client()
    bystander.force_login(other_user)
    fork = InAThread(session)
    fork.start_and_wait_until_copying()
    start = time.perf_counter()
    response = bystander.post(reverse("chat:rename", args=[theirs.pk]), {"title": "Mine, now"})
    waited = time.perf_counter() - start
    assert response.status_code == 302
    assert fork.still_copying(), "the rename waited for the whole fork"
    assert waited < 1.0
    fork.done.wait(60)
    assert fork.error is None
    forked = ChatSession.objects.get(forked_from_id=session.leaf_id)
    assert Entry.objects.filter(session=forked).count() == 6_000
    assert not forked.building and forked.leaf.text == session.leaf.text


@pytest.mark.asyncio
async def test_another_users_prompt_is_stored_and_answered_while_a_large_fork_is_copied(
    owner, other_user, fake_anthropic, open_tab, batches_of_200
):
    fake_anthropic.enqueue(Reply.text("Answered while the fork ran."))
    session = await db_async(long_session)(owner, 6_000)
    theirs = await db_async(make_session)(other_user)
    _, tab = await open_tab(other_user, theirs)
    fork = InAThread(session)
    await db_async(fork.start_and_wait_until_copying)()
    await tab.send(message="Are you there?")
    await tab.until("Answered while the fork ran.")
    assert await db_async(fork.still_copying)(), "the prompt waited for the whole fork"
    await generation.wait_idle()
    await db_async(fork.done.wait)(60)
    assert fork.error is None


def test_a_fork_being_made_is_out_of_sight(owner, batches_of_200):
    session = long_session(owner, 3_000)
    client = Client()
    client.force_login(owner)
    fork = InAThread(session)
    fork.start_and_wait_until_copying()
    half_made = ChatSession.objects.get(building=True)
    assert client.get(half_made.get_absolute_url()).status_code == 404
    assert f"/sessions/{half_made.pk}/" not in client.get("/").content.decode()
    refused = client.post(
        reverse("chat:fork", args=[session.pk]), {"entry": session.leaf_id}, follow=True
    )
    assert "A fork of yours is still being made: wait until it opens, then fork again." in (
        refused.content.decode()
    )
    fork.done.wait(60)
    assert client.get(half_made.get_absolute_url()).status_code == 200


def test_another_users_rename_goes_on_while_a_large_file_is_imported(
    owner, other_user, batches_of_200
):
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z"}
    lines = [json.dumps(header)] + [
        json.dumps({"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}" if i else None, "message": {"role": "user", "content": f"step {i} of the import"}})
        for i in range(6_000)
    ]  # fmt: skip
    theirs = make_session(other_user)
    bystander = Client()
    bystander.force_login(other_user)
    importing = InAThread(lines=lines)
    importing.start_and_wait_until_copying()
    assert not ChatSession.objects.filter(owner=owner).filter(ChatSession.kept()).exists()
    response = bystander.post(reverse("chat:rename", args=[theirs.pk]), {"title": "Mine, now"})
    assert response.status_code == 302
    assert importing.still_copying(), "the rename waited for the whole import"
    importing.done.wait(60)
    assert importing.error is None
    imported = ChatSession.objects.get(owner=owner)
    assert not imported.building and imported.leaf.text == "step 5999 of the import"
    assert Entry.objects.filter(session=imported).count() == 6_000


def test_a_fork_longer_than_the_cap_is_refused_in_words(owner, settings):
    settings.AGENTWEB_MAX_FORK_ENTRIES = 10
    session = make_session(owner, exchanges=6)
    client = Client()
    client.force_login(owner)
    response = client.post(
        reverse("chat:fork", args=[session.pk]), {"entry": session.leaf_id}, follow=True
    )
    assert "A fork holds at most 10 entries; this branch has 12." in response.content.decode()
    assert ChatSession.objects.count() == 1


def test_a_large_deleted_session_is_purged_a_batch_at_a_time(owner, settings, batches_of_200):
    settings.AGENTWEB_UNDO_DELETE_SECONDS = 0
    session = long_session(owner, 1_000)
    make_session(owner, exchanges=1)  # another session of the owner's stays
    session.soft_delete()
    assert care.purge(owner) == 1
    assert not Entry.objects.filter(session_id=session.pk).exists()
    assert ChatSession.objects.count() == 1


def test_a_fork_a_dead_process_left_half_made_is_purged(owner):
    session = make_session(owner, exchanges=1)
    stale = ChatSession.objects.create(owner=owner, model="m", building=True)
    ChatSession.objects.filter(pk=stale.pk).update(created_at=stale.created_at.replace(year=2020))
    assert care.purge(owner) == 1
    assert list(ChatSession.objects.values_list("pk", flat=True)) == [session.pk]


def left_half_made(owner, *, lease_ended: bool) -> ChatSession:
    """A fork being copied by a process: still renewing its lease, or stopped (its lease ran
    out a moment ago)."""
    lease = timezone.now() + timedelta(seconds=-1 if lease_ended else 60)
    return ChatSession.objects.create(
        owner=owner, model="m", building=True, generation_lease_until=lease
    )


def test_a_fork_a_stopped_process_left_stands_in_no_ones_way_once_its_lease_runs_out(owner):
    session = make_session(owner, exchanges=1)
    left = left_half_made(owner, lease_ended=True)
    client = Client()
    client.force_login(owner)
    response = client.post(reverse("chat:fork", args=[session.pk]), {"entry": session.leaf_id})
    assert response.status_code == 302  # forked at once: not "still being made" for an hour
    assert ChatSession.objects.filter(forked_from_id=session.leaf_id, building=False).exists()
    client.get("/")  # the owner's list purges what was left
    assert not ChatSession.objects.filter(pk=left.pk).exists()


def test_a_fork_still_being_copied_keeps_its_place(owner):
    session = make_session(owner, exchanges=1)
    copying = left_half_made(owner, lease_ended=False)
    with pytest.raises(BranchRefused, match="A fork of yours is still being made"):
        session.fork(session.leaf_id or 0)
    assert care.purge(owner) == 0
    assert ChatSession.objects.filter(pk=copying.pk).exists()


def test_a_fork_copied_in_batches_renews_its_lease_as_it_goes(owner, batches_of_200):
    session = long_session(owner, 1_000)
    fork = InAThread(session)
    fork.start_and_wait_until_copying()
    leases = set()
    while fork.still_copying():
        leases |= set(
            ChatSession.objects.filter(building=True).values_list(
                "generation_lease_until", flat=True
            )
        )
        time.sleep(0.01)
    fork.thread.join()
    assert fork.error is None
    assert len(leases - {None}) >= 3  # taken, then renewed batch after batch
    assert all(lease > timezone.now() for lease in leases - {None})


def test_start_up_removes_the_forks_a_stopped_process_left(owner):
    left = left_half_made(owner, lease_ended=True)
    copying = left_half_made(owner, lease_ended=False)
    out = io.StringIO()
    call_command("recover_generations", stdout=out)
    assert "1 fork(s) or import(s) left half made were removed." in out.getvalue()
    assert list(ChatSession.objects.values_list("pk", flat=True)) == [copying.pk]
    assert left.pk != copying.pk


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL's limit of 65,535 parameters a statement; Django reads SQLite in batches",
)
@pytest.mark.timeout(360)  # 34 s alone; past the 120 s of every other test on a loaded machine
def test_a_fork_of_99000_entries_is_made_and_opens(owner):
    session = linear_session(owner, [f"step {i}" for i in range(99_000)])
    client = Client()
    client.force_login(owner)
    response = client.post(reverse("chat:fork", args=[session.pk]), {"entry": session.leaf_id})
    assert response.status_code == 302
    fork = ChatSession.objects.get(forked_from_id=session.leaf_id)
    assert Entry.objects.filter(session=fork).count() == 99_000
    page = client.get(fork.get_absolute_url())
    assert page.status_code == 200 and "step 98999" in page.content.decode()
