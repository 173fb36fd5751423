"""Continue (issue 56): a reply that stopped at the model's maximum length goes on. The model is
sent the context with the reply last, as the start of its own turn (no thinking first); what
it writes is a reply of its own after that one, which the page shows in the same card and
the context joins to it."""

from __future__ import annotations

import pytest

from sessions import generation
from sessions.models import Entry

from .conftest import FAKE_MODEL, db_async, make_session
from .fake_anthropic import Reply

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

LONG = "one two three four five six seven eight nine ten eleven twelve"


@pytest.fixture
def short_output(settings):
    """The fake model writes at most 8 tokens a reply."""
    settings.AGENTWEB_MODELS = {
        **settings.AGENTWEB_MODELS,
        FAKE_MODEL: {"label": "Fake Claude", "window": 20_000, "max_output": 8},
    }


async def replies_of(session) -> list[Entry]:
    return await db_async(
        lambda: list(Entry.objects.filter(session=session, role="assistant").order_by("pk"))
    )()


async def test_continue_goes_on_from_the_reply_and_joins_it(
    owner, fake_anthropic, open_tab, short_output
):
    fake_anthropic.enqueue(Reply.text(LONG), Reply.text(" nine ten."), Reply.text("Counted."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="count to twelve")
    html = await tab.until("Continue</button>")
    await generation.wait_idle()
    [cut] = await replies_of(session)
    assert cut.text == "one two three four five six seven eight"
    assert cut.data["message"]["stopReason"] == "length"
    assert f'name="entry" value="{cut.pk}"><button type="submit">Continue</button>' in html

    await tab.send(action="continue", entry=cut.pk)
    await tab.until("nine ten.")
    await generation.wait_idle()
    sent = fake_anthropic.requests[1]["json"]
    assert sent["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "one two three four five six seven eight"}],
    }
    assert "thinking" not in sent
    _, more = await replies_of(session)
    assert (more.text, more.data["continues"], more.parent_id) == (" nine ten.", cut.pk, cut.pk)

    _, reloaded = await open_tab(owner, session)  # one card: the rest goes on in it
    page = await reloaded.until(f'id="entry-{more.pk}"')
    assert f'data-reply="{cut.pk}"' in page

    await tab.send(message="thanks")
    await tab.until("Counted.")
    asked = fake_anthropic.requests[2]["json"]["messages"]
    assert asked[-2] == {  # the context joins the two into one turn of the model's
        "role": "assistant",
        "content": [
            {"type": "text", "text": "one two three four five six seven eight"},
            {"type": "text", "text": " nine ten."},
        ],
    }


async def test_a_reply_that_ended_by_itself_is_not_continued(owner, fake_anthropic, open_tab):
    fake_anthropic.enqueue(Reply.text("Done."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="hi")
    html = await tab.until("Done.</p>")
    await generation.wait_idle()
    assert "Continue</button>" not in html
    [reply] = await replies_of(session)
    await tab.send(action="continue", entry=reply.pk)
    refused = await tab.until("can be continued")
    assert "Only the latest reply, stopped at its maximum length, can be continued." in refused
    assert len(fake_anthropic.requests) == 1
    assert not (await db_async(lambda: type(session).objects.get(pk=session.pk))()).generation_id
