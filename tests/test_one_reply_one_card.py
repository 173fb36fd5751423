"""One reply, one card (issue 20, item 8): a reply's tool rounds show inside the card its first
round opened, with one header and one Copy, Regenerate and Fork, whether the page is loaded,
the reply streams in, or the session was imported."""

from __future__ import annotations

import re

import pytest

from sessions import generation, session_file

from .conftest import db_async, make_session
from .fake_anthropic import Reply

PLAN = {"todos": [{"text": "Read the config", "state": "pending"}]}


def cards(page: str) -> list[str]:
    """Each transcript article's opening tag."""
    return re.findall(r'<article id="entry-\d+"[^>]*>', page)


def two_round_session(owner):
    """A question whose reply called a tool twice before it answered."""
    session = make_session(owner)
    session.append_message("user", [{"type": "text", "text": "Plan and check"}])
    for n in (1, 2):
        call = {"type": "toolCall", "id": f"call-{n}", "name": "todo_write", "arguments": PLAN}
        session.append_message("assistant", [{"type": "text", "text": f"Round {n}."}, call])
        session.append(
            kind="message",
            role="toolResult",
            content=[{"type": "text", "text": "ok"}],
            data={"message": {"toolCallId": f"call-{n}", "toolName": "todo_write"}},
        )
    answer = session.append_message("assistant", [{"type": "text", "text": "All checked."}])
    return session, answer


@pytest.mark.django_db
def test_a_replys_tool_rounds_are_one_card_with_one_set_of_actions(client, owner):
    session, answer = two_round_session(owner)
    client.force_login(owner)
    page = client.get(session.get_absolute_url()).content.decode()
    assistant = [tag for tag in cards(page) if "entry--assistant" in tag]
    first = int(re.search(r"entry-(\d+)", assistant[0])[1])
    assert [("entry--continues" in tag, f'data-reply="{first}"' in tag) for tag in assistant] == [
        (False, False),
        (True, True),
        (True, True),
    ]
    assert page.count('<h2 class="entry-label">Assistant') == 1
    assert page.count('class="regenerate"') == 1
    assert f'"action": "regenerate", "entry": {first}}}' in page  # the whole reply again
    assert page.count('class="fork"') == 2  # the question's and the reply's
    assert f'hx-vals=\'{{"entry": {answer.pk}}}\' hx-swap="none" title="A new session' in page


@pytest.mark.django_db
def test_an_imported_sessions_tool_rounds_are_one_card_too(client, owner):
    session, _ = two_round_session(owner)
    client.force_login(owner)
    exported = "".join(session_file.export_jsonl(session)).splitlines()
    imported = session_file.import_jsonl(owner, exported)
    page = client.get(imported.get_absolute_url()).content.decode()
    assert sum("entry--continues" in tag for tag in cards(page)) == 2
    assert page.count('class="regenerate"') == 1


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_streamed_replys_later_round_joins_the_card_of_its_first(
    owner, fake_anthropic, open_tab
):
    fake_anthropic.enqueue(Reply.tool("todo_write", PLAN, text="Planning."), Reply.text("Done."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="Plan it")
    html = await tab.until("Done.</p>")
    await generation.wait_idle()
    pushed = [tag for tag in cards(html) if "entry--assistant" in tag]
    assert ["entry--continues" in tag for tag in pushed] == [False, True]
    first = re.search(r"entry-(\d+)", pushed[0])[1]
    assert f'data-reply="{first}"' in pushed[1]
    assert f'"action": "regenerate", "entry": {first}}}' in html.split(pushed[1])[1]
