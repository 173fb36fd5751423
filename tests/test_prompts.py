"""Your prompts (issue 20, item 13): each user creates, edits and deletes their own `/name`
templates on a page of their own; the words after the name fill them in as the reference agent
fills its templates; they show in the `/` menu and in /help; and a preference holds standing
instructions added to every handoff request."""

from __future__ import annotations

import pytest

from sessions import generation
from sessions.models import Entry, Preferences, PromptTemplate
from sessions.models.prompts import expand_arguments

from .conftest import db_async, make_session
from .fake_anthropic import Reply
from .test_handoff import DOCUMENT

db = pytest.mark.django_db


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


@pytest.mark.parametrize(
    ("body", "args", "expanded"),
    [
        ("Review $1 for $2", "src/app.py speed", "Review src/app.py for speed"),
        (
            "Review $1 for $2",
            "'src/my app.py' \"speed and size\"",
            "Review src/my app.py for speed and size",
        ),
        ("All: $@ / $ARGUMENTS", "a b c", "All: a b c / a b c"),
        ("From the second: ${@:2}", "a b c d", "From the second: b c d"),
        ("Two from the second: ${@:2:2}", "a b c d", "Two from the second: b c"),
        ("Missing: [$3]", "a", "Missing: []"),
        # $@ reads quotes as ${@:N} does (it kept them, while ${@:N} stripped them)
        ("$@ | ${@:1}", "'src/my app.py' fast", "src/my app.py fast | src/my app.py fast"),
        ("Unclosed: $1", "'a b", "Unclosed: 'a"),
        ("No marks here", "ignored", "No marks here"),
    ],
)
def test_the_words_after_a_name_fill_the_prompt_in(body, args, expanded):
    assert expand_arguments(body, args) == expanded


@db
def test_a_user_creates_edits_and_deletes_their_own_prompts(signed_in, owner):
    response = signed_in.post(
        "/prompts/", {"name": "review", "description": "Review a file", "body": "Review $1"}
    )
    assert response.status_code == 302
    prompt = PromptTemplate.objects.get(owner=owner)
    page = signed_in.get("/prompts/").content.decode()
    assert '<code>/review</code></a> <span class="muted">Review a file</span>' in page
    signed_in.post(
        f"/prompts/{prompt.pk}/",
        {"name": "review", "description": "Review it", "body": "Look at $1"},
    )
    prompt.refresh_from_db()
    assert (prompt.description, prompt.body) == ("Review it", "Look at $1")
    signed_in.post(f"/prompts/{prompt.pk}/delete/")
    assert not PromptTemplate.objects.filter(owner=owner).exists()


@db
@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        ("handoff", "/handoff is one of agentweb&#x27;s own commands."),
        ("9lives", "A name starts with a letter and has letters, digits, - and _ only."),
        ("review", "You have a prompt called /review already."),
    ],
)
def test_a_prompt_name_that_cannot_work_is_refused_and_nothing_is_lost(
    signed_in, owner, name, refusal
):
    PromptTemplate.objects.create(owner=owner, name="review", body="Review $1")
    page = signed_in.post("/prompts/", {"name": name, "body": "Kept text"}).content.decode()
    assert refusal in page
    assert "Kept text</textarea>" in page
    assert PromptTemplate.objects.filter(owner=owner).count() == 1


@db
def test_another_users_prompt_cannot_be_seen_edited_or_deleted(signed_in, other_user):
    theirs = PromptTemplate.objects.create(owner=other_user, name="secret", body="theirs")
    assert signed_in.get(f"/prompts/{theirs.pk}/").status_code == 404
    assert signed_in.post(f"/prompts/{theirs.pk}/", {"name": "x", "body": "y"}).status_code == 404
    assert signed_in.post(f"/prompts/{theirs.pk}/delete/").status_code == 404
    assert "secret" not in signed_in.get("/prompts/").content.decode()
    PromptTemplate.objects.get(pk=theirs.pk, body="theirs")


@db
def test_the_slash_menu_offers_ones_own_prompts_with_their_description(signed_in, owner):
    PromptTemplate.objects.create(owner=owner, name="review", description="Review a file", body="x")
    session = make_session(owner)
    page = signed_in.get(f"/sessions/{session.pk}/").content.decode()
    assert 'data-name="review"' in page
    assert '<span class="badge">your prompt</span> <span class="muted">Review a file</span>' in page


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_prompt_sent_from_the_box_is_expanded_and_help_lists_it(
    owner, fake_anthropic, open_tab
):
    await db_async(PromptTemplate.objects.create)(
        owner=owner, name="compare", description="Compare two files", body="Compare $1 with $2."
    )
    fake_anthropic.enqueue(Reply.text("They differ."))
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/help")
    listed = await tab.until("Your prompts")
    assert "<dt><code>/handoff [--model &lt;id&gt;] [focus instructions]</code></dt>" in listed
    assert "<dt><code>/compare</code></dt><dd>Compare two files</dd>" in listed
    await tab.send(message="/compare a.py 'my b.py'")
    await tab.until("They differ.")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"][-1]["text"]
    assert sent == "Compare a.py with my b.py."


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_my_handoff_instructions_are_added_to_every_handoff_request(
    owner, fake_anthropic, open_tab
):
    await db_async(Preferences.objects.create)(
        user=owner, handoff_instructions="Always list the open pull requests."
    )
    fake_anthropic.enqueue(Reply.text(DOCUMENT))
    session = await db_async(make_session)(owner, exchanges=2)
    _, tab = await open_tab(owner, session)
    await tab.send(message="/handoff")
    await tab.until("data-url=")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"][-1]["text"]
    assert sent.endswith(
        "The user's standing instructions for handoff documents (follow them within the six "
        "sections above):\nAlways list the open pull requests."
    )
    assert "## Goal" in sent and "## Next Steps" in sent  # the six sections stay asked for
    request = await db_async(
        lambda: Entry.objects.get(session=session, role="user", data__purpose="handoff")
    )()
    assert request.text == sent  # visible in the request the old session keeps


@db
def test_the_preferences_say_which_ones_need_claude_and_hold_the_instructions(
    signed_in, owner, settings
):
    settings.ANTHROPIC_API_KEY = ""
    page = signed_in.get("/preferences/").content.decode()
    assert page.count("Claude only: this server runs offline, so it does nothing here.") == 2
    assert '<span class="percent-field"><input type="number"' in page
    signed_in.post("/preferences/", {"handoff_instructions": "Name the branch."})
    assert Preferences.objects.get(user=owner).handoff_instructions == "Name the branch."


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_prompt_that_repeats_its_words_is_held_to_the_longest_message(
    owner, other_user, fake_anthropic, open_tab
):
    await db_async(PromptTemplate.objects.create)(owner=owner, name="echo", body="$@ " * 6_000)
    session = await db_async(make_session)(owner)
    _, tab = await open_tab(owner, session)
    typed = "/echo " + "word " * 19_000  # 95,006 characters: under the limit as typed
    await tab.send(message=typed)
    said = await tab.until("fills in to")
    assert (
        "That prompt fills in to more than 100,000 characters, the longest message agentweb "
        "takes: shorten the words after its name." in said
    )
    assert said.count("word ") == 19_000  # what was typed, given back whole
    assert not await db_async(Entry.objects.filter(session=session).exists)()
    assert not fake_anthropic.requests
    # The same prompt with a few words fills in and is sent.
    fake_anthropic.enqueue(Reply.text("Heard."))
    await tab.send(message="/echo hi")
    await tab.until("Heard.")
    await generation.wait_idle()
    sent = fake_anthropic.requests[0]["json"]["messages"][-1]["content"][-1]["text"]
    assert sent == "hi " * 6_000


@db
def test_a_prompt_longer_than_its_own_limit_is_refused(signed_in, owner, settings):
    settings.AGENTWEB_MAX_TEMPLATE_CHARS = 20_000
    response = signed_in.post(
        "/prompts/", {"name": "huge", "description": "", "body": "x" * 20_001}
    )
    assert "A prompt is at most 20,000 characters long; this one has 20,001." in (
        response.content.decode()
    )
    assert not PromptTemplate.objects.filter(owner=owner).exists()
