"""Automation you can trust (issue 55, item 5): an automatic handoff or compaction runs at most
AGENTWEB_MAX_AUTO_HANDOFFS times in a row without the user's say, never twice without a user
turn between, and once per crossing of the threshold; and every handoff records its size before
and after and what it cost, which the status line and the lineage map show."""

from __future__ import annotations

from decimal import Decimal

import pytest

from sessions import generation, status, usage
from sessions.models import ChatSession, Entry, PendingPrompt, Preferences

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply
from .test_auto_handoff import DOCUMENT, session_at
from .test_handoff import redirected_session
from .test_window import NOTES, last_text, long_session, offer_fake_model

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def small_window(settings, fake_anthropic):
    """The fake model's window is 10,000 tokens, priced; the owner hands off at 50 %."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 10_000, "max_output": 1_000},
    }
    settings.AGENTWEB_PRICES = {**settings.AGENTWEB_PRICES, FAKE_MODEL: {"input": 3, "output": 15}}
    return fake_anthropic


async def in_a_row(session: ChatSession) -> int:
    return (await db_async(status.restart)(session)).automatic_in_a_row


async def compactions_of(session: ChatSession) -> list[Entry]:
    return await db_async(list)(
        Entry.objects.filter(session_id=session.pk, kind="compaction").order_by("pk")
    )


async def compacted_automatically(
    owner,
    session: ChatSession,
    open_tab,
    fake,
    *,
    document: str = DOCUMENT,
    after: int = 20,
    answer: str = "Answered after compacting.",
) -> ChatSession:
    """A prompt that passes the threshold: the session compacts first, then answers it (its
    context then `after` tokens, as the fake reports it)."""
    fake.enqueue(Reply(chunks=[document], input_tokens=4_000, output_tokens=600))
    fake.enqueue(Reply(chunks=[answer], input_tokens=after))
    _, tab = await open_tab(owner, session)
    await tab.send(message="and now the tests, please")
    await tab.until(f"{answer}</p>")
    await generation.wait_idle()
    return await db_async(ChatSession.objects.get)(pk=session.pk)


async def handed_off_automatically(owner, old: ChatSession, open_tab, fake) -> ChatSession:
    fake.enqueue(Reply(chunks=[DOCUMENT], input_tokens=4_000, output_tokens=600))
    fake.enqueue(Reply.text("Answered there."))
    _, tab = await open_tab(owner, old)
    await tab.send(message="and now the tests, please")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    return await db_async(ChatSession.objects.get)(pk=new_id)


async def test_each_automatic_handoff_counts_and_past_the_limit_the_prompt_stays(
    owner, small_window, open_tab, settings
):
    settings.AGENTWEB_MAX_AUTO_HANDOFFS = 2
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50)
    first = await handed_off_automatically(
        owner, await db_async(session_at)(owner, 4_995), open_tab, small_window
    )
    assert await in_a_row(first) == 1
    await db_async(ChatSession.objects.filter(pk=first.pk).update)(context_tokens=4_995)
    second = await handed_off_automatically(owner, first, open_tab, small_window)
    assert await in_a_row(second) == 2

    await db_async(ChatSession.objects.filter(pk=second.pk).update)(context_tokens=4_995)
    small_window.enqueue(Reply(chunks=["Answered here, past the limit."], input_tokens=9_000))
    _, tab = await open_tab(owner, second)
    await tab.send(message="and the docs too")
    html = await tab.until("Answered here, past the limit.</p>")
    assert "data-url=" not in html
    await generation.wait_idle()
    assert (
        "and the docs too"
        in await db_async(
            lambda: Entry.objects.filter(session_id=second.pk, role="user").last().text
        )()
    )
    assert not await db_async(PendingPrompt.objects.exists)()
    page = await tab.until_idle()
    assert "/handoff</code> to continue in a fresh session" in page  # it suggests, and waits


async def test_a_handoff_the_user_asks_for_starts_the_count_again(owner, small_window, open_tab):
    small_window.enqueue(Reply(chunks=[DOCUMENT], input_tokens=4_000, output_tokens=600))
    old = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url="))
    await generation.wait_idle()
    assert await in_a_row(await db_async(ChatSession.objects.get)(pk=new_id)) == 0


async def test_a_session_just_handed_off_sends_its_prompt_before_any_second_handoff(
    owner, small_window, open_tab
):
    """Its seed alone is below the bar of two messages: the prompt goes there first."""
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50)
    new = await handed_off_automatically(
        owner, await db_async(session_at)(owner, 4_995), open_tab, small_window
    )
    assert len(small_window.requests) == 2  # the document, then the prompt in the new session
    assert small_window.requests[1]["json"]["messages"][-1]["content"][-1]["text"] == (
        "and now the tests, please"
    )
    assert new.parent_session_id is not None


async def test_the_size_before_and_after_and_the_cost_show_on_the_status_line_and_the_map(
    owner, small_window, open_tab, client
):
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50)
    old = await db_async(session_at)(owner, 4_995)
    new = await handed_off_automatically(owner, old, open_tab, small_window)
    seed = await db_async(lambda: Entry.objects.filter(session_id=new.pk).first().data)()
    # 4,000 tokens in at $3 a million and 600 out at $15: $0.012 + $0.009
    assert Decimal(seed["cost"]) == Decimal("0.021")
    after = seed["context_tokens_after"]
    shown = f"4,995 before handoff: 5k → {after} tokens, $0.0210"
    await db_async(client.force_login)(owner)
    page = (await db_async(client.get)(f"/sessions/{new.pk}/")).content.decode()
    assert shown in page
    lineage = (await db_async(client.get)(f"/sessions/{new.pk}/map/")).content.decode()
    assert f"↳ handed off (5k → {after} tokens, $0.0210) to" in lineage


async def test_automatic_compactions_count_too_and_past_the_limit_the_prompt_stays(
    owner, small_window, open_tab, settings
):
    settings.AGENTWEB_MAX_AUTO_HANDOFFS = 2
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50, auto_compacts=True)
    session = await compacted_automatically(
        owner, await db_async(session_at)(owner, 4_995), open_tab, small_window
    )
    assert await in_a_row(session) == 1
    await db_async(ChatSession.objects.filter(pk=session.pk).update)(context_tokens=4_995)
    session = await compacted_automatically(
        owner, session, open_tab, small_window, answer="Answered after compacting again."
    )
    assert await in_a_row(session) == 2
    assert len(await compactions_of(session)) == 2

    await db_async(ChatSession.objects.filter(pk=session.pk).update)(context_tokens=4_995)
    small_window.enqueue(Reply(chunks=["Answered here, past the limit."], input_tokens=9_000))
    _, tab = await open_tab(owner, session)
    await tab.send(message="and the docs too")
    await tab.until("Answered here, past the limit.</p>")
    await generation.wait_idle()
    assert len(await compactions_of(session)) == 2  # no third one
    assert "/handoff</code> to continue in a fresh session" in await tab.until_idle()


async def test_a_compact_the_user_asks_for_starts_the_count_again(owner, small_window, open_tab):
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50, auto_compacts=True)
    session = await compacted_automatically(
        owner, await db_async(session_at)(owner, 4_995), open_tab, small_window
    )
    assert await in_a_row(session) == 1
    small_window.enqueue(Reply.text(DOCUMENT))
    _, tab = await open_tab(owner, session)
    await tab.send(message="/compact")
    await tab.until("Compacted: this session goes on from the document")
    await generation.wait_idle()
    assert await in_a_row(await db_async(ChatSession.objects.get)(pk=session.pk)) == 0


async def test_a_context_the_compaction_left_past_the_threshold_is_not_compacted_again(
    owner, small_window, open_tab, settings
):
    """Once per crossing: a document of about 6,000 tokens leaves the context past the 5,000
    of the threshold, so the next prompt is answered here, and the status line suggests."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 10_000, "max_output": 8_000},
    }
    await db_async(Preferences.objects.create)(user=owner, auto_handoff_at=50, auto_compacts=True)
    long_document = f"{DOCUMENT}\n\n" + "The parser keeps its state between files. " * 450
    session = await compacted_automatically(
        owner,
        await db_async(session_at)(owner, 4_995),
        open_tab,
        small_window,
        document=long_document,
        after=6_100,
    )
    [compaction] = await compactions_of(session)
    assert compaction.data["fields"]["details"]["tokensAfter"] > 5_000

    small_window.enqueue(Reply(chunks=["Answered without compacting."], input_tokens=8_200))
    _, tab = await open_tab(owner, session)
    await tab.send(message="and the docs too")
    await tab.until("Answered without compacting.</p>")
    await generation.wait_idle()
    assert len(await compactions_of(session)) == 1
    assert len(small_window.requests) == 3  # the document, and one request for each prompt
    assert "/handoff</code> to continue in a fresh session" in await tab.until_idle()


async def test_what_a_handoff_cost_is_all_its_rounds_its_notes_and_its_document(
    owner, fake_anthropic, open_tab, settings
):
    """A session of twice the window: the model first takes notes on its older part, a round
    for each stretch, then writes the document; each round was paid for."""
    offer_fake_model(settings, fake_anthropic, window_tokens=6_000)
    settings.AGENTWEB_PRICES = {**settings.AGENTWEB_PRICES, FAKE_MODEL: {"input": 3, "output": 15}}

    def model(body: dict) -> Reply:
        if "<conversation>" in last_text(body):  # $0.003 + $0.0015 a round
            return Reply(chunks=[NOTES], input_tokens=1_000, output_tokens=100)
        return Reply(chunks=[DOCUMENT], input_tokens=2_000, output_tokens=300)  # $0.0105

    fake_anthropic.responder = model
    old = await db_async(long_session)(owner)
    before = await db_async(usage.of_session)(old)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    new_id = redirected_session(await tab.until("data-url=", timeout=60))
    await generation.wait_idle()
    rounds = len(fake_anthropic.requests) - 1
    assert rounds >= 2
    seed = await db_async(lambda: Entry.objects.filter(session_id=new_id).first().data)()
    assert Decimal(seed["cost"]) == Decimal("0.0105") + rounds * Decimal("0.0045")
    spent = await db_async(usage.of_session)(await db_async(ChatSession.objects.get)(pk=old.pk))
    assert spent.input - before.input == 2_000 + rounds * 1_000  # the session's usage too
    assert spent.output - before.output == 300 + rounds * 100
