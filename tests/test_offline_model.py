"""The offline model's handoff document on the generated 2 MB sessions: it carries what matters."""

from __future__ import annotations

from functools import cache

import pytest

from bench.make_session import FACTS, generate
from sessions.agent import AgentSession
from sessions.models import Entry
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
)


def missing_facts(document: str) -> list[str]:
    """The planted facts the document does not hold word for word."""
    return [fact for fact in PLANTED if fact not in document]


def test_the_planted_facts_are_those_the_generator_plants():
    assert len(PLANTED) == len(FACTS)
    assert all(fact in text for fact, (_, text) in zip(PLANTED, FACTS, strict=True))


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
