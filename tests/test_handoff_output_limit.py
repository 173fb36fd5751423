"""No silent cut-off: a handoff document that stops at the model's output limit is finished in
one more round (the model goes on with its own turn), or the handoff fails naming the limit. A
cut-off document is never switched as if it were whole."""

from __future__ import annotations

import pytest

from sessions import handoff
from sessions.models import ChatSession, Entry
from sessions.offline import go_on, respond

from .conftest import FAKE_MODEL, SIX_SECTIONS, db_async, make_session
from .fake_anthropic import TOKEN, Reply

in_the_database = pytest.mark.django_db(transaction=True)

DOCUMENT = "\n\n".join(f"## {section}\n{section} details, all of them." for section in SIX_SECTIONS)
# The fake model's output limit, in the fake's own tokens: two thirds of the document, so that
# it stops well before the end, and one more round is enough to finish it.
LIMIT = len(TOKEN.findall(DOCUMENT)) * 2 // 3


@pytest.fixture
def small_output(settings, fake_anthropic):
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 200_000, "max_output": LIMIT},
    }
    return fake_anthropic


def cut(text: str) -> str:
    """What the fake server writes of `text` before it stops at LIMIT tokens."""
    return "".join(TOKEN.findall(text)[:LIMIT])


@pytest.mark.asyncio
@in_the_database
async def test_a_document_cut_at_the_output_limit_is_finished_in_one_more_round(
    owner, small_output, open_tab
):
    start = cut(DOCUMENT).rstrip()
    assert len(start) < len(DOCUMENT) - 20  # the document is well past the limit
    small_output.enqueue(Reply.text(DOCUMENT), Reply.text(DOCUMENT[len(start) :]))
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    first, second = small_output.requests[-2:]
    assert first["json"]["max_tokens"] == second["json"]["max_tokens"] == LIMIT
    # The second round goes on with the model's own turn: the request ends with it.
    assert second["json"]["messages"][:-1] == first["json"]["messages"]
    assert second["json"]["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": start}],
    }
    new = await db_async(ChatSession.objects.get)(parent_session=old)
    seed = await db_async(lambda: Entry.objects.filter(session=new).first())()
    assert handoff.unwrap(seed.text).startswith(DOCUMENT)
    assert seed.data["warnings"] == []  # whole: every section is there
    kept = await db_async(
        lambda: list(Entry.objects.filter(session=old, role="assistant", data__purpose="handoff"))
    )()
    assert [entry.text for entry in kept] == [cut(DOCUMENT), DOCUMENT[len(start) :]]


@pytest.mark.asyncio
@in_the_database
async def test_a_document_that_stops_at_the_limit_again_fails_naming_the_limit(
    owner, small_output, open_tab
):
    small_output.enqueue(Reply.text(DOCUMENT), Reply.text(DOCUMENT))  # the second stops too
    old = await db_async(make_session)(owner, exchanges=1)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    html = await tab.until("Handoff failed:")
    assert (
        "Handoff failed: the document stopped at Fake Claude&#x27;s output limit of "
        f"{LIMIT} tokens, even after one more round to finish it"
    ) in html
    assert len(small_output.requests) == 2
    assert await db_async(ChatSession.objects.count)() == 1


@pytest.mark.asyncio
@in_the_database
async def test_the_offline_model_stops_at_its_limit_as_a_model_does(owner, settings, open_tab):
    settings.ANTHROPIC_API_KEY = ""
    local = settings.AGENTWEB_MODELS["local"]
    settings.AGENTWEB_MODELS = {**settings.AGENTWEB_MODELS, "local": {**local, "max_output": 30}}
    old = await db_async(make_session)(owner, model="local", exchanges=12)
    _, tab = await open_tab(owner, old)
    await tab.send(message="/handoff")
    html = await tab.until("Handoff failed:")
    assert "output limit of 30 tokens, even after one more round to finish it" in html
    assert await db_async(ChatSession.objects.count)() == 1


def test_the_offline_model_goes_on_with_a_turn_it_was_given_the_start_of():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Parse config.toml, please."}]},
        {"role": "user", "content": [{"type": "text", "text": handoff.build_prompt()}]},
    ]
    whole = respond(messages)
    assert go_on(messages, whole[:50]) == whole[50:]
    assert go_on(messages, "Something it would never write") == ""
