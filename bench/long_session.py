"""/handoff on a generated 2 MB session of the reference agent: each figure beside its target.

In one run, on the file `make_session.py` writes (version 3, seed 7), medians of:

  import          the JSONL import (read, validate, write)        target ≤ 2 s
  export          the JSONL export (every line, as the file wrote it)
  page            the session page (Django test client)           target ≤ 300 ms
  coverage panel  the coverage report and its panel's HTML        target ≤ 500 ms
  side by side    the whole side-by-side page, cold cache (both transcripts whole: the
                  performance issue windows them)
  switch          the handoff switch after the document           target ≤ 100 ms
  context build   the model's context from the loaded branch      target ≤ 50 ms

with floors to compare against, measured in the same run: parsing the file's JSON, and
loading the branch from the database.

Run: .venv/bin/python bench/long_session.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics

import harness
from harness import median_seconds, time_switches

harness.setup()  # Django on a throwaway database, before any project import

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.template.loader import render_to_string  # noqa: E402
from django.test import Client  # noqa: E402
from make_session import generate  # noqa: E402

from sessions import context, coverage, handoff, session_file, store  # noqa: E402
from sessions.models import ChatSession  # noqa: E402

TARGETS = {
    "import": 2.0,
    "page": 0.3,
    "coverage panel": 0.5,
    "switch": 0.1,
    "context build": 0.05,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS = ["*"]
    user = User.objects.create_user("bench")
    client = Client()
    client.force_login(user)
    lines = generate()
    size = len("\n".join(lines).encode())

    figures: dict[str, float] = {}
    figures["json floor"] = median_seconds(lambda: [json.loads(line) for line in lines], args.runs)
    figures["import"] = median_seconds(lambda: session_file.import_jsonl(user, lines), args.runs)
    session = session_file.import_jsonl(user, lines)
    figures["export"] = median_seconds(
        lambda: sum(map(len, session_file.export_jsonl(session))), args.runs
    )
    figures["branch load"] = median_seconds(lambda: store.get_branch(session), args.runs)
    branch = store.get_branch(session)
    figures["context build"] = median_seconds(lambda: context.build_context(branch), args.runs)
    client.get(session.get_absolute_url())
    figures["page"] = median_seconds(lambda: client.get(session.get_absolute_url()), args.runs)

    # A handoff whose document names a few facts, as a model's would.
    document = "\n\n".join(f"## {name}\nsrc/limiter/slidingWindow.ts" for name in handoff.SECTIONS)
    figures["switch"] = statistics.median(time_switches(session, document, args.runs))
    new = ChatSession.objects.filter(parent_session=session).latest("pk")
    url = f"/sessions/{session.pk}/compare/{new.pk}/"

    def panel() -> None:  # what the panel costs: the report, and its part of the page
        seed = store.get_branch(new)[0]
        report = coverage.coverage(store.get_branch(session), seed.text, session.cwd)
        shown = {"coverage": report, "old": session, "new": new}
        html = render_to_string("sessions/compare.html#coverage", shown)
        assert "What the handoff carried" in html

    def page() -> None:
        cache.clear()
        response = client.get(url)
        assert b"What the handoff carried" in response.content

    figures["coverage panel"] = median_seconds(panel, args.runs)
    figures["side by side"] = median_seconds(page, args.runs)

    print(f"{len(lines):,} lines, {size / 1_048_576:.2f} MB, {args.runs} runs each, medians:")
    for name, seconds in figures.items():
        target = TARGETS.get(name)
        verdict = ""
        if target:
            met = "met" if seconds <= target else "MISSED"
            verdict = f"target ≤ {target * 1000:,.0f} ms: {met} (×{seconds / target:.2f} of it)"
        print(f"  {name:15} {seconds * 1000:9.1f} ms   {verdict}")
    print(
        f"  import is ×{figures['import'] / figures['json floor']:.1f} of parsing the JSON; "
        f"the page ×{figures['page'] / figures['branch load']:.1f} of loading the branch"
    )


if __name__ == "__main__":
    main()
