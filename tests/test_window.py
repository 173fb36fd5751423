"""A handoff of a context larger than the model's window: clip, leave out, summarise in chunks.

The fake Anthropic server counts tokens its own way (not agentweb's estimate) and refuses
an over-window request as the API does, so a wrong budget fails these tests.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from bench.make_session import generate
from sessions import context, generation, handoff, ledger, session_file, store, window
from sessions.context import Part
from sessions.models import ChatSession, Entry
from sessions.providers import catalog

from .conftest import FAKE_MODEL, SIX_SECTIONS, db_async
from .fake_anthropic import Reply, count_tokens

DOCUMENT = "\n\n".join(f"## {section}\n{section} details." for section in SIX_SECTIONS)
NOTES = "## Goal\nNotes goal.\n\n## Progress\nNotes progress."


def turn(n: int, result_chars: int = 0) -> list[Part]:
    parts = [Part("user", f"question {n}", "text", n * 10), Part("assistant", f"answer {n}", "text", n * 10 + 1)]  # fmt: skip
    if result_chars:
        parts.append(Part("user", f"[Tool result: read]: {n}" + "x" * result_chars, "tool_result", n * 10 + 2))  # fmt: skip
    return parts


def tokens(parts: list[Part], prompt: str = "PROMPT") -> int:
    return sum(p.tokens for p in parts) + context.estimate_tokens(prompt)


# --- the plan, step by step -----------------------------------------------------------------
def test_a_context_that_fits_is_sent_as_it_is():
    parts = turn(1, 3000) + turn(2, 3000)
    result = window.plan(parts, "PROMPT", budget=tokens(parts))
    assert result.parts == parts and result.report() == []


def test_the_oldest_tool_results_are_clipped_first_and_only_as_many_as_needed():
    parts = turn(1, 30_000) + turn(2, 30_000) + turn(3, 30_000)
    result = window.plan(parts, "PROMPT", budget=tokens(parts) - 5_000)
    texts = [p.text for p in result.parts if p.kind == "tool_result"]
    assert "characters clipped by agentweb" in texts[0]
    assert texts[1:] == [parts[5].text, parts[8].text]  # the newer results stay whole
    assert result.report() == ["Clipped 1 older tool output to their first and last lines."]
    assert result.size("PROMPT") <= tokens(parts) - 5_000


def test_then_the_oldest_kept_turns_before_the_compaction_are_left_out_and_its_summary_stays():
    summary = Part("user", "SUMMARY", "summary")
    kept = [
        Part(p.role, p.text * 400, p.kind, p.entry_id, kept=True)
        for n in (1, 2, 3)
        for p in turn(n)
    ]
    after = turn(4) + turn(5)
    parts = [summary, *kept, *after]
    result = window.plan(parts, "PROMPT", budget=tokens([summary, *kept[2:], *after]))
    assert result.parts[0] == summary
    assert result.parts[1:] == kept[2:] + after  # turn 1 (two parts) is gone, turn 2 stays
    assert result.dropped == 1 and not result.chunks
    assert "Left out the 1 oldest turn kept from before the latest compaction" in result.report()[0]


def test_last_the_older_part_is_summarised_in_chunks_that_each_fit():
    parts = [p for n in range(40) for p in turn(n, 2_000)]
    budget = tokens(parts) // 3
    result = window.plan(parts, "PROMPT", budget=budget)
    assert result.chunks and result.parts, "some turns are summarised, the latest are kept"
    assert (result.parts[0].role, result.parts[0].kind) == ("user", "text")  # a whole turn
    in_order = [p.entry_id for chunk in result.chunks for p in chunk] + [
        p.entry_id for p in result.parts
    ]
    assert in_order == [p.entry_id for p in parts]  # nothing lost, nothing reordered
    limit = window.chunk_budget(budget, handoff.NOTES_PROMPT)
    assert all(sum(p.tokens for p in chunk) <= limit for chunk in result.chunks)
    assert result.size("PROMPT") <= budget // 2
    assert result.report()[-1].startswith(f"Summarised the {result.summarised_entries} oldest")


# --- against the fake Anthropic server --------------------------------------------------------
def offer_fake_model(settings, fake, window_tokens: int, max_output: int = 1_000) -> None:
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": window_tokens, "max_output": max_output},
    }
    fake.window = window_tokens


def last_text(body: dict) -> str:
    return body["messages"][-1]["content"][-1]["text"]


def answer(body: dict) -> Reply:
    """The model: notes for a notes request, the document for the handoff prompt."""
    return Reply.text(NOTES if "<conversation>" in last_text(body) else DOCUMENT)


def long_session(owner, episodes: int = 20) -> ChatSession:
    session = session_file.import_jsonl(owner, generate(episodes=episodes, seed=3))
    session.change_model(FAKE_MODEL)
    return session


def assert_every_request_fit(fake, budget: int) -> None:
    for request in fake.requests:
        body = request["json"]
        assert request["tokens"] <= budget, (request["tokens"], budget)
        assert request["tokens"] + body["max_tokens"] <= fake.window


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_handoff_of_twice_the_window_succeeds_and_every_request_is_under_budget(
    owner, fake_anthropic, open_tab, settings
):
    offer_fake_model(settings, fake_anthropic, window_tokens=6_000)
    fake_anthropic.responder = answer
    session = await db_async(long_session)(owner)
    whole = [{"role": m["role"], "content": m["content"]} for m in await db_async(store.session_context)(session)]  # fmt: skip
    assert count_tokens({"messages": whole}) > 2 * 6_000
    work = await db_async(lambda: ledger.section(ledger.ledger_of(store.get_branch(session))))()
    assert work.startswith("## Work ledger")  # the session's tool work goes with the request
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    html = await tab.until("data-url=", timeout=60)
    assert "New session started with handoff context" in html
    await generation.wait_idle()

    budget = catalog.spec(FAKE_MODEL).budget
    assert_every_request_fit(fake_anthropic, budget)
    *notes_requests, final = [r["json"] for r in fake_anthropic.requests]
    assert notes_requests and all("<conversation>" in last_text(b) for b in notes_requests)
    assert fake_anthropic.counts, "the plan was checked against the model's own count"
    first = final["messages"][0]["content"][0]["text"]
    assert first.startswith("This conversation is longer than Fake Claude's context window")
    assert f"<notes>\n### Part 1 of {len(notes_requests)}\n\n{NOTES}" in first
    assert last_text(final) == handoff.build_prompt(ledger=work)

    notes = await db_async(lambda: list(Entry.objects.filter(session=session, custom_type="handoff_notes").order_by("id")))()  # fmt: skip
    assert [(n.data["part"], n.text) for n in notes] == [
        (i + 1, NOTES) for i in range(len(notes_requests))
    ]
    new = await db_async(ChatSession.objects.get)(parent_session=session)
    seed = (await db_async(store.get_branch)(new))[0]
    assert seed.data["fitted"][-1].startswith("Summarised the ")
    assert handoff.unwrap(seed.text).startswith(f"{DOCUMENT}\n\n## Also carried over")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_stretch_the_model_finds_too_long_is_split_and_taken_again(
    owner, fake_anthropic, open_tab, settings
):
    """The model's window turns out smaller than the table says: requests are refused once."""
    offer_fake_model(settings, fake_anthropic, window_tokens=7_000)
    fake_anthropic.responder = answer
    session = await db_async(long_session)(owner)
    fake_anthropic.window = 5_500  # the API accepts less than configured
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    html = await tab.until("data-url=", timeout=60)
    assert "New session started with handoff context" in html
    await generation.wait_idle()
    statuses = [r["tokens"] + r["json"]["max_tokens"] > 5_500 for r in fake_anthropic.requests]
    assert any(statuses), "at least one request was refused as too long"
    notes = await db_async(lambda: list(Entry.objects.filter(session=session, custom_type="handoff_notes")))()  # fmt: skip
    assert notes and all(n.status == "complete" for n in notes), html


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancel_while_notes_stream_closes_the_connection_and_creates_nothing(
    owner, fake_anthropic, open_tab, settings
):
    offer_fake_model(settings, fake_anthropic, window_tokens=6_000)
    fake_anthropic.responder = lambda body: Reply.held_tokens(3, 397)
    session = await db_async(long_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("Handoff notes, part 1 of", timeout=30)
    await tab.until("token2 ")  # the first notes are held there
    await tab.send(action="cancel")
    await tab.until("Handoff cancelled")
    assert await asyncio.to_thread(fake_anthropic.wait_for_disconnect, 5)
    await generation.wait_idle()
    assert await db_async(ChatSession.objects.count)() == 1
    notes = await db_async(lambda: list(Entry.objects.filter(session=session, custom_type="handoff_notes")))()  # fmt: skip
    assert [n.status for n in notes] == ["aborted"] and notes[0].text.startswith("token0 token1")
    assert len(fake_anthropic.requests) == 1  # the document was never asked for


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_over_window_prompt_fails_in_plain_words_and_suggests_a_handoff(
    owner, fake_anthropic, open_tab, settings
):
    offer_fake_model(settings, fake_anthropic, window_tokens=6_000)
    session = await db_async(long_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="go on")
    html = await tab.until("Failed:")
    assert re.search(
        r"Failed: the conversation is too long for Fake Claude&#x27;s context window \(prompt is "
        r"too long: \d+ tokens &gt; 6000 maximum\)",
        html,
    ), html
    assert "type <code>/handoff</code> to continue in a fresh session" in html


def test_the_fake_server_counts_tokens_its_own_way():
    body = {"messages": [{"role": "user", "content": "self.foo(bar) 请"}]}
    assert count_tokens(body) == 4 + len(["self", ".", "foo", "(", "bar", ")", " ", "请"])
    assert json.dumps(body)  # a plain JSON body, as the SDK sends
