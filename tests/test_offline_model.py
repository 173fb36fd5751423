"""The offline model's handoff document on the generated 2 MB sessions: it carries what matters."""

from __future__ import annotations

from functools import cache

import pytest

from bench.make_session import FACTS, generate
from sessions import coverage, store
from sessions.agent import AgentSession
from sessions.models import Entry
from sessions.session_file import import_jsonl

from .conftest import db_async

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@cache
def corpus(version: int) -> tuple[str, ...]:
    return tuple(generate(version=version))


def carried_facts(document: str) -> list[str]:
    normalised = f" {coverage.normalise(document)} "
    words = frozenset(normalised.split())
    return [text for kind, text in FACTS if coverage.is_carried(kind, text, normalised, words)]


async def offline_handoff(owner, version: int):
    session = await db_async(import_jsonl)(owner, list(corpus(version)))
    assert session.model == "local"
    branch = await db_async(store.get_branch)(session)
    result = await AgentSession(session).handoff()
    report = coverage.coverage(branch, result.reply.text, session.cwd)  # the model's own words
    return session, result, report


@pytest.mark.parametrize("version", [3, 1])
async def test_the_document_carries_nine_tenths_of_the_salient_items_and_every_planted_fact(
    owner, settings, version
):
    settings.ANTHROPIC_API_KEY = ""
    _, result, report = await offline_handoff(owner, version)
    assert len(report.salient) >= 20
    assert report.salient_carried >= 0.9 * len(report.salient), [
        i.text for i in report.salient_dropped
    ]
    assert carried_facts(result.reply.text) == [text for _, text in FACTS]
    assert result.new_session is not None


async def test_with_a_small_window_it_summarises_in_parts_and_still_carries_them(owner, settings):
    settings.ANTHROPIC_API_KEY = ""
    local = settings.AGENTWEB_MODELS["local"]
    settings.AGENTWEB_MODELS = {**settings.AGENTWEB_MODELS, "local": {**local, "window": 25_000}}
    session, result, report = await offline_handoff(owner, 3)
    notes = await db_async(lambda: Entry.objects.filter(session=session, custom_type="handoff_notes").count())()  # fmt: skip
    assert notes >= 2
    assert result.reply.data["handoff"]["fitted"][-1].startswith("Summarised the ")
    assert report.salient_carried >= 0.9 * len(report.salient)
    assert carried_facts(result.reply.text) == [text for _, text in FACTS]
