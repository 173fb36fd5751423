"""`/compact [focus]` (issue 55, item 4): the handoff document, written as `/handoff` writes
it, becomes a `compaction` entry of the same session: the next request carries the summary and
not the old turns, the page shows a divider with the size before and after, the export writes
it as the reference agent writes a compaction, and recall still reads the turns above it."""

from __future__ import annotations

import json
import re

import pytest

from sessions import context, generation, recall, session_file, store
from sessions.models import ChatSession, Entry, Preferences

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT, entries_of, session_count

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

SUMMARY = (
    "The conversation history before this point was compacted into the following summary:"
    f"\n\n<summary>\n{DOCUMENT}\n</summary>"
)


def session_at(owner, tokens: int) -> ChatSession:
    session = make_session(owner, exchanges=2)
    ChatSession.objects.filter(pk=session.pk).update(context_tokens=tokens)
    session.refresh_from_db()
    return session


async def compacted(owner, fake_anthropic, open_tab, *, command: str = "/compact"):
    """A session of two exchanges at 186,000 tokens, compacted; its tab and its entries."""
    session = await db_async(session_at)(owner, 186_000)
    _, tab = await open_tab(owner, session)
    await tab.send(message=command)
    await tab.until("Compacted: this session goes on from the document")
    await generation.wait_idle()
    return session, tab, await entries_of(session.pk)


async def test_compact_keeps_the_session_and_its_next_request_carries_the_summary_only(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT), Reply.text("Going on from the summary."))
    session, tab, entries = await compacted(owner, fake_anthropic, open_tab)
    html = "".join(tab.received)
    assert "data-url=" not in html and await session_count() == 1  # no new session
    assert re.search(r"Context compacted · 186k → \d+ tokens</summary>", html)

    *above, compaction = entries
    assert [e.text for e in above[:4]] == ["question 0", "answer 0", "question 1", "answer 1"]
    assert compaction.kind == "compaction" and compaction.text == DOCUMENT
    fields = compaction.data["fields"]
    assert (fields["summary"], fields["tokensBefore"]) == (DOCUMENT, 186_000)
    assert compaction.data["refs"] == {"firstKeptEntryId": compaction.pk}  # none kept
    row = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert row.compacted_at == compaction.pk and row.context_tokens < 1_000
    assert row.context_tokens == fields["details"]["tokensAfter"]

    await tab.send(message="go on")
    await tab.until("Going on from the summary.")
    await generation.wait_idle()
    assert fake_anthropic.requests[1]["json"]["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": SUMMARY}, {"type": "text", "text": "go on"}],
        }
    ]


async def test_compact_with_a_focus_asks_for_it(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    await compacted(owner, fake_anthropic, open_tab, command="/compact the parser only")
    asked = fake_anthropic.requests[0]["json"]["messages"][-1]["content"][-1]["text"]
    assert "the parser only" in asked


async def test_the_export_writes_the_compaction_as_the_reference_agent_does_and_reads_it_back(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    session, _, _ = await compacted(owner, fake_anthropic, open_tab)
    row = await db_async(ChatSession.objects.get)(pk=session.pk)  # its leaf: the compaction
    lines = await db_async(lambda: list(session_file.export_jsonl(row)))()
    [line] = [json.loads(text) for text in lines if '"type":"compaction"' in text]
    assert list(line) == [  # the reference agent's order, on either database
        "type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId", "tokensBefore",
        "details",
    ]  # fmt: skip
    assert (line["summary"], line["tokensBefore"]) == (DOCUMENT, 186_000)
    assert line["firstKeptEntryId"] == line["id"]  # the reference keeps nothing above it either

    imported = await db_async(session_file.import_jsonl)(owner, lines)
    branch = await db_async(store.get_branch)(imported)
    parts = context.context_parts(branch)
    assert [part.text for part in parts] == [SUMMARY]  # the old turns stay out of its context


async def test_recall_reads_the_turns_above_the_sessions_own_compaction(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    session, _, entries = await compacted(owner, fake_anthropic, open_tab)
    row = await db_async(ChatSession.objects.get)(pk=session.pk)
    assert await db_async(recall.offered)(row)  # a session of no lineage offers it now
    found = await db_async(recall.recall)(row, "answer")
    assert {hit.entry for hit in found} >= {entries[1].pk, entries[3].pk}
    assert {hit.session for hit in found} == {session.pk}


async def test_the_threshold_compacts_in_place_when_the_owner_prefers_it(
    owner, settings, fake_anthropic, open_tab
):
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 10_000, "max_output": 1_000},
    }
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50, auto_compacts=True)
    fake_anthropic.enqueue(Reply.text(DOCUMENT), Reply.text("Answered after compacting."))
    session = await db_async(session_at)(owner, 4_995)
    _, tab = await open_tab(owner, session)
    await tab.send(message="and now the tests, please")  # 4,995 + 9 tokens: past 5,000
    html = await tab.until("Answered after compacting.")
    await generation.wait_idle()
    assert "compacting first" in html and "data-url=" not in html
    assert await session_count() == 1
    assert fake_anthropic.requests[1]["json"]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SUMMARY},
                {"type": "text", "text": "and now the tests, please"},
            ],
        }
    ]
    kinds = [(e.kind, e.text) for e in await entries_of(session.pk)][-3:]
    assert kinds == [
        ("compaction", DOCUMENT),
        ("message", "and now the tests, please"),
        ("message", "Answered after compacting."),
    ]


async def test_a_compactions_document_cannot_start_a_session_from_the_review_form(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    session, tab, entries = await compacted(owner, fake_anthropic, open_tab)
    document = next(e for e in entries if e.role == "assistant" and e.purpose == "handoff")
    await tab.send(action="handoff_confirm", entry=document.pk, document=DOCUMENT)
    assert "can no longer be used" in await tab.until("can no longer be used")
    assert await session_count() == 1
    assert await db_async(Entry.objects.filter(session_id=session.pk).count)() == len(entries)


async def test_the_lineage_map_shows_the_sessions_compactions_with_their_figures(
    owner, settings, fake_anthropic, open_tab, client
):
    settings.AGENTWEB_PRICES = {**settings.AGENTWEB_PRICES, FAKE_MODEL: {"input": 3, "output": 15}}
    fake_anthropic.enqueue(Reply(chunks=[DOCUMENT], input_tokens=4_000, output_tokens=600))
    session, _, entries = await compacted(owner, fake_anthropic, open_tab)
    after = entries[-1].data["fields"]["details"]["tokensAfter"]
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(f"/sessions/{session.pk}/map/")).content.decode()
    # 4,000 tokens in at $3 a million and 600 out at $15: $0.012 + $0.009
    assert f"compacted (186k → {after} tokens, $0.0210)" in page
    assert (
        f"Context compacted · 186k → {after} tokens, $0.0210</summary>"
        in (await db_async(client.get)(f"/sessions/{session.pk}/")).content.decode()
    )
