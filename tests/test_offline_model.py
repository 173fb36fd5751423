"""The offline model's handoff document on the generated 2 MB sessions: it carries what matters."""

from __future__ import annotations

from functools import cache

import pytest

from bench.make_session import END_STATE, FACTS, generate
from bench.make_session import STALE_STEPS as GENERATED_STALE_STEPS
from sessions import handoff
from sessions.agent import AgentSession
from sessions.models import Entry
from sessions.offline import respond
from sessions.session_file import import_jsonl

from .conftest import db_async

in_the_database = pytest.mark.django_db(transaction=True)


@cache
def corpus(version: int) -> tuple[str, ...]:
    return tuple(generate(version=version))


# The facts bench/make_session.py plants in the generated session, as the document must hold
# them: word for word (the decision by what it decided).
PLANTED = (
    "src/limiter/slidingWindow.ts",
    "src/config/limits.yaml",
    "test/limiter.spec.ts",
    "scripts/load-test.sh",
    "legacy/billing_v1.ts",
    "SlidingWindowLimiter",
    "computeRetryAfter()",
    "RATE_LIMIT_REDIS_URL",
    "TypeError: Cannot read properties of undefined (reading 'windowMs')",
    "https://github.com/acme/gateway/issues/481",
    "120 ms",
    "5000 req/s",
    "Redis sorted sets instead of the token bucket",
    "v2.3.1",  # where the session ends: the tag it pushed,
    "npm run publish",  # the command that failed last,
    "error TS1005: ';' expected.",  # and its error line
)
STALE_STEPS = ("Make test/limiter.spec.ts pass", "run scripts/load-test.sh")


def missing_facts(document: str) -> list[str]:
    """The planted facts the document does not hold word for word."""
    return [fact for fact in PLANTED if fact not in document]


def test_the_planted_facts_are_those_the_generator_plants():
    assert len(PLANTED) == len(FACTS) + len(END_STATE)
    assert all(fact in text for fact, (_, text) in zip(PLANTED, FACTS, strict=False))
    assert PLANTED[len(FACTS) :] == END_STATE and STALE_STEPS == GENERATED_STALE_STEPS


def section(document: str, name: str) -> str:
    """The text of one `## name` section of a document."""
    return document.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0].strip()


async def offline_handoff(owner, version: int):
    session = await db_async(import_jsonl)(owner, list(corpus(version)))
    assert session.model == "local"
    result = await AgentSession(session).handoff()
    return session, result


@pytest.mark.asyncio
@in_the_database
@pytest.mark.parametrize("version", [3, 1])
async def test_the_document_carries_every_planted_fact(owner, settings, version):
    settings.ANTHROPIC_API_KEY = ""
    _, result = await offline_handoff(owner, version)
    assert missing_facts(result.reply.text) == []
    assert result.new_session is not None


@pytest.mark.asyncio
@in_the_database
async def test_with_a_small_window_it_summarises_in_parts_and_still_carries_them(owner, settings):
    settings.ANTHROPIC_API_KEY = ""
    local = settings.AGENTWEB_MODELS["local"]
    settings.AGENTWEB_MODELS = {**settings.AGENTWEB_MODELS, "local": {**local, "window": 25_000}}
    session, result = await offline_handoff(owner, 3)
    notes = await db_async(lambda: Entry.objects.filter(session=session, custom_type="handoff_notes").count())()  # fmt: skip
    assert notes >= 2
    assert result.reply.data["handoff"]["fitted"][-1].startswith("Summarised the ")
    assert missing_facts(result.reply.text) == []


@pytest.mark.asyncio
@in_the_database
@pytest.mark.parametrize("version", [3, 1])
async def test_the_document_says_where_the_work_stands_at_the_end(owner, settings, version):
    settings.ANTHROPIC_API_KEY = ""
    _, result = await offline_handoff(owner, version)
    document = result.reply.text
    goal = section(document, "Goal")  # the objective, then the request that refined it last
    assert goal.startswith(
        "- Replace the gateway's token bucket with a sliding-window limiter that holds "
        "5000 req/s per tenant."
    )
    assert goal.endswith(
        "- Most recently: Tag v2.3.1, push the tag, then publish the package to npm."
    )
    assert "- [x] Ran `git tag v2.3.1 && git push origin v2.3.1`: it worked" in section(
        document, "Progress"
    )
    assert (
        "- Latest failure: `npm run publish` failed with "
        "`src/limiter/retryAfter.ts(42,17): error TS1005: ';' expected.`"
    ) in section(document, "Critical Context")
    next_steps = section(document, "Next Steps")
    assert next_steps.startswith("- [ ] Fix the failing `npm run publish`:")
    assert [step for step in STALE_STEPS if step in next_steps] == []  # done since
    assert "Asked:" not in document  # no user line echoed as progress


def test_the_goal_is_the_focus_or_the_direction_never_a_command_or_an_answer():
    history = [
        {"role": "user", "content": "/mode"},
        {
            "role": "user",
            "content": "Port the importer in src/importer.py to streaming, keep the API.",
        },
        {"role": "assistant", "content": "On it: reading src/importer.py."},
        {"role": "user", "content": "can leave it"},
        {"role": "user", "content": "yeah, do it all"},
    ]
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    assert section(document, "Goal") == (
        "- Port the importer in src/importer.py to streaming, keep the API."
    )
    focused = respond([*history, {"role": "user", "content": handoff.build_prompt("the tests")}])
    assert section(focused, "Goal").startswith("- the tests\n")


# A document a reader can act on (issue 54, item 3).


def test_a_late_question_is_never_the_goal_and_the_rules_the_user_set_are_the_constraints():
    history = [
        {"role": "user", "content": "Build a theme system for the TUI: palettes load from JSON."},
        {"role": "assistant", "content": "Starting with src/theme/index.ts."},
        {"role": "user", "content": "e2e tests only. Commit after each change, please."},
        {"role": "user", "content": "Use hex, not 256 colours. why would we queue and then append?"},
        {"role": "assistant", "content": "Fair: appending directly."},
        {"role": "user", "content": "what did i just execute?"},
    ]  # fmt: skip
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    assert section(document, "Goal") == (
        "- Build a theme system for the TUI: palettes load from JSON."
    )
    constraints = section(document, "Constraints & Preferences")
    for rule in (
        "e2e tests only.",
        "Commit after each change, please.",
        "Use hex, not 256 colours.",
    ):
        assert f"- {rule}" in constraints
    assert "?" not in constraints


def test_a_build_whose_pipe_hid_the_failure_is_reported_as_failed():
    history = [
        {"role": "user", "content": "Build the theme package and tell me how it went."},
        {"role": "assistant", "content": '[Assistant tool call]: bash(command="npm run build | tee b.log")'},
        {"role": "user", "content": "[Tool result: bash]: src/theme/index.ts(3,10): error TS2305: "
         "Module '\"./palette\"' has no exported member 'nord'."},
    ]  # fmt: skip
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    progress = section(document, "Progress")
    assert "Ran `npm run build | tee b.log`: it failed" in progress
    assert "it worked" not in progress
    assert section(document, "Next Steps").startswith(
        "- [ ] Fix the failing `npm run build | tee b.log`:"
    )


def test_a_placeholder_in_next_steps_seeds_no_todo():
    from sessions import checklists

    document = (
        "## Progress\n\n- [x] Wrote it.\n\n## Next Steps\n\n- Nothing recorded in this session."
    )
    assert checklists.from_document(document) == []
    assert [
        t.text for t in checklists.from_document("## Next Steps\n\n- [ ] None\n- [ ] Ship it")
    ] == ["Ship it"]


def test_dictated_colours_and_names_are_items_and_a_tools_echo_is_no_progress():
    history = [
        {"role": "user", "content": "Theme it: #2E3440 for the background, #88C0D0 for accents."},
        {"role": "user", "content": "The theme is called Nord Light in the picker."},
        {"role": "assistant", "content": '[Assistant tool call]: todo_write(todos=[{"content": "x"}])'},
        {"role": "user", "content": "[Tool result: todo_write]: Todo list updated."},
        {"role": "assistant", "content": "Todo list updated."},
    ]  # fmt: skip
    document = respond([*history, {"role": "user", "content": handoff.build_prompt()}])
    assert "`#2E3440`" in section(document, "Critical Context")
    assert "`#88C0D0`" in section(document, "Critical Context")
    assert "`Nord Light`" in section(document, "Critical Context")
    assert "Todo list updated" not in section(document, "Progress")
