"""Usage and cost (issue 11, item 6): each reply shows its tokens and what they cost at the
prices in settings; a session shows its total, a chain its total across handoffs."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from sessions import generation, handoff, session_file, usage
from sessions.models import Entry

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply

SONNET = "claude-sonnet-4-5"


def test_tokens_cost_what_the_price_table_says_per_million():
    used = usage.priced(SONNET, 1_000_000, 100_000, cache_read=2_000_000, cache_write=0)
    assert used.cost == Decimal("5.1")  # 3.00 input + 1.50 output + 0.60 cache reads
    assert usage.dollars(used.cost) == "$5.10"
    assert usage.dollars(usage.priced(SONNET, 1_200, 300).cost) == "$0.0081"


def test_a_model_without_a_price_has_tokens_and_no_cost():
    used = usage.priced("claude-unknown", 10, 5)
    assert used.cost is None and used.tokens == 15
    assert usage.dollars((used + usage.priced(SONNET, 1, 1)).cost) == ""


def test_the_free_offline_model_shows_no_cost_and_a_trace_shows_as_one():
    assert usage.dollars(usage.priced("local", 1_200, 300).cost) == ""
    assert usage.priced("local", 1_200, 300).tokens == 1_500
    assert usage.dollars(usage.priced(SONNET, 10, 0).cost) == "<$0.0001"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_reply_shows_its_tokens_and_cost_and_the_session_its_total(
    owner, fake_anthropic, open_tab, settings
):
    settings.AGENTWEB_PRICES = {
        FAKE_MODEL: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    }
    fake_anthropic.enqueue(
        Reply(chunks=["Hi."], input_tokens=1_200, output_tokens=300, cache_read_tokens=10_000),
        Reply(chunks=["Again."], input_tokens=1_000, output_tokens=100, cache_write_tokens=2_000),
    )
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="hello")
    reply = await tab.until("entry--assistant status--complete")
    assert "1,200 in · 300 out · 10,000 from cache · $0.0111" in reply
    await tab.until("This session: 1,200 in · 300 out · 10,000 from cache · $0.0111")
    await generation.wait_idle()
    await tab.send(message="again")
    await tab.until("1,000 in · 100 out · 2,000 to cache · $0.0120")
    # 0.0111 + (3,000 + 1,500 + 7,500) / 1,000,000
    await tab.until(
        "This session: 2,200 in · 400 out · 10,000 from cache · 2,000 to cache · $0.0231"
    )


@pytest.mark.django_db
def test_a_chain_shows_its_total_across_handoffs_in_the_list(client, owner):
    first = make_session(owner, model=SONNET)
    first.append_message("user", [{"type": "text", "text": "Port the parser"}])
    doc = first.append_message("assistant", [{"type": "text", "text": "doc"}], model=SONNET,
        input_tokens=1_000_000, output_tokens=10_000,
    )  # fmt: skip
    second = handoff.new_session(first, from_entry=doc, content="doc", data={})
    second.append_message("user", [{"type": "text", "text": "go on"}])
    second.append_message("assistant", [{"type": "text", "text": "done"}], model=SONNET,
        input_tokens=200_000, output_tokens=20_000,
    )  # fmt: skip
    client.force_login(owner)
    page = client.get("/").content.decode()
    assert "1,000,000 in · 10,000 out · $3.15" in page  # the first session
    assert "200,000 in · 20,000 out · $0.9000" in page  # the second
    assert "in all: 1,200,000 in · 30,000 out · $4.05" in page


@pytest.mark.django_db
def test_cache_tokens_survive_export_and_import(owner):
    session = make_session(owner, model=SONNET)
    session.append_message("user", [{"type": "text", "text": "q"}])
    session.append_message("assistant", [{"type": "text", "text": "a"}], model=SONNET,
        input_tokens=5, output_tokens=6, cache_read_tokens=7, cache_write_tokens=8,
    )  # fmt: skip
    lines = [line.strip() for line in session_file.export_jsonl(session)]
    assert json.loads(lines[-1])["message"]["usage"]["cacheRead"] == 7
    copy = session_file.import_jsonl(owner, lines)
    reply = Entry.objects.filter(session=copy, role="assistant").get()
    assert (reply.cache_read_tokens, reply.cache_write_tokens) == (7, 8)


@pytest.mark.django_db
def test_a_sessions_total_counts_every_reply_since_it_was_last_read_whoever_wrote_it(owner):
    session = make_session(owner)
    said = [{"type": "text", "text": "ok"}]
    session.append_message("assistant", said, model=SONNET, input_tokens=1_000, output_tokens=10)
    assert usage.of_session(session) == usage.priced(SONNET, 1_000, 10)
    session.append_message("assistant", said, model="local", input_tokens=7, output_tokens=3)
    session.append_message(
        "assistant", said, model=SONNET, input_tokens=200, output_tokens=20, cache_read_tokens=5
    )
    other = make_session(owner)  # another session's replies are not this one's
    other.append_message("assistant", said, model=SONNET, input_tokens=9_999, output_tokens=9)
    expected = usage.priced(SONNET, 1_200, 30, cache_read=5) + usage.priced("local", 7, 3)
    assert usage.of_session(session) == expected
    assert usage.of_session(session) == expected  # read again, nothing new
    usage.SUMMED.forget()  # a process that has not read it yet sums it whole
    assert usage.of_session(session) == expected
