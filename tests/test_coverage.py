"""Coverage: which concrete items of the old session the handoff document carries."""

from __future__ import annotations

import pytest

from sessions.coverage import coverage
from sessions.items import concrete, extract, normalise
from sessions.models import Entry
from sessions.salience import items_of


def said(role: str, text: str, purpose: str = "") -> Entry:
    return Entry(
        kind=Entry.Kind.MESSAGE,
        role=role,
        content=[{"type": "text", "text": text}],
        data={"purpose": purpose} if purpose else {},
    )


TRANSCRIPT = [
    said(
        "user",
        "The importer in src/agentweb/importer.py crashes on large files. See https://example.org/bugs/42 .",
    ),
    said(
        "assistant",
        "The traceback ends with `KeyError: 'parentId'` raised from parse_entries(). "
        "Reading a 12 MB file takes 850 ms.",
    ),
    said("user", "We decided to stream the file line by line instead of loading it whole."),
    said(
        "assistant",
        "I added `SessionReader.iter_lines()` and a MAX_IMPORT_BYTES limit in config/settings.toml.",
    ),
    said("user", "/handoff", purpose="handoff"),
    said("assistant", "## Goal\nsrc/never_in_the_transcript.py", purpose="handoff"),
]


def kinds(items):
    return {(kind, text) for kind, text in items}


def test_it_extracts_paths_identifiers_errors_urls_numbers_and_decisions():
    items = kinds(extract(entry.text for entry in TRANSCRIPT[:4]))
    assert ("path", "src/agentweb/importer.py") in items
    assert ("path", "config/settings.toml") in items
    assert ("url", "https://example.org/bugs/42") in items
    assert ("identifier", "parse_entries()") in items
    assert ("identifier", "SessionReader.iter_lines()") in items
    assert ("identifier", "MAX_IMPORT_BYTES") in items
    assert ("error", "KeyError: 'parentId'") in items
    assert ("number", "12 MB") in items and ("number", "850 ms") in items
    assert (
        "decision",
        "We decided to stream the file line by line instead of loading it whole.",
    ) in items


def test_errors_keep_their_message_up_to_where_it_ends():
    items = kinds(
        extract(
            [
                "Traceback ... ValueError: invalid literal for int() with base 10: 'x'",
                "error: could not compile `foo`; 2 errors",
                "It raised TimeoutError after 30 s, e.g. twice.",
            ]
        )
    )
    assert ("error", "ValueError: invalid literal for int() with base 10: 'x'") in items
    assert ("error", "error: could not compile") in items
    assert ("error", "TimeoutError") in items and ("number", "30 s") in items
    assert not any(text == "e.g" for _, text in items)


def test_a_path_inside_a_url_is_not_a_second_item():
    items = kinds(extract(["see https://example.org/docs/setup.html now"]))
    assert items == {("url", "https://example.org/docs/setup.html")}


def test_the_handoff_exchange_itself_is_not_an_item_of_the_old_session():
    result = coverage(TRANSCRIPT, "")
    assert all("never_in_the_transcript" not in item.text for item in result.items)


def test_items_the_document_mentions_in_other_words_or_casing_are_carried():
    document = """## Critical Context
- The crash is in Importer.py (KeyError on parentId) from Parse Entries.
- sessionReader iter_lines is new; max import bytes is set in config/settings.toml
- Bug: https://example.org/bugs/42
## Key Decisions
- Stream the file line by line rather than loading the whole thing.
"""
    result = coverage(TRANSCRIPT, document)
    carried = {item.text for item in result.items if item.carried}
    missing = {item.text for item in result.missing}
    assert {
        "src/agentweb/importer.py",
        "parse_entries()",
        "SessionReader.iter_lines()",
        "MAX_IMPORT_BYTES",
        "config/settings.toml",
        "https://example.org/bugs/42",
        "KeyError: 'parentId'",
        "We decided to stream the file line by line instead of loading it whole.",
    } <= carried
    assert {"12 MB", "850 ms"} <= missing
    assert result.carried == len(result.items) - len(result.missing)


def test_a_word_inside_another_word_does_not_count_as_carried():
    result = coverage([said("user", "Check log_level in app.py")], "We fixed the login page.")
    assert {item.text for item in result.missing} == {"app.py", "log_level"}


def test_normalising_splits_case_and_separators():
    assert (
        normalise("parseConfig")
        == normalise("parse_config")
        == normalise("Parse-Config")
        == "parse config"
    )


def test_ten_thousand_entries_are_covered():
    """Its speed is measured by bench/coverage.py; this checks the result at that size."""
    entries = [
        said(
            "user" if i % 2 else "assistant",
            f"Edit src/module_{i % 300}.py: fix handler_{i} after 5{i % 10} ms",
        )
        for i in range(10_000)
    ]
    result = coverage(entries, "src/module_1.py handler_1")
    assert len(result.items) > 300
    carried = {item.text for item in result.items if item.carried}
    assert {"src/module_1.py", "handler_1"} <= carried and "handler_2" not in carried


# --- noise and ranking, on labelled examples ---------------------------------------------------
def tool(text: str, *, error: bool = False, name: str = "bash") -> Entry:
    return Entry(
        kind=Entry.Kind.MESSAGE,
        role="toolResult",
        content=[{"type": "text", "text": text}],
        data={"message": {"toolName": name, "isError": error}},
    )


def texts_of(items) -> set[str]:
    return {item.text for item in items}


def test_mime_types_and_slash_joined_prose_words_are_not_items():
    entry = said(
        "user",
        "Serve image/png and application/json (not text/plain). Use r/g or date/time, "
        "find/replace and/or sed. Keep src/app and docs/setup.md.",
    )
    assert texts_of(items_of([entry])) == {"src/app", "docs/setup.md"}


def test_one_file_is_one_item_however_it_is_written():
    entries = [
        said("user", "Open ./web/x.js and ../web/x.js"),
        said("assistant", "Edited web/x.js and /home/dev/proj/web/x.js"),
        tool("--- a/web/x.js\n+++ b/web/x.js\n@@ web/x.js:12"),
    ]
    [item] = [i for i in items_of(entries, cwd="/home/dev/proj") if i.kind == "path"]
    assert item.text == "./web/x.js" and item.mentions == 3


FILLER = [said("user" if n % 2 else "assistant", "Carry on with the next part.") for n in range(12)]


def labelled_session() -> list[Entry]:
    """A session whose items were labelled salient or not by reading it."""
    early = [
        said("user", "We decided to keep Postgres instead of moving to MySQL."),  # salient
        tool("ls\nnode_modules/lodash/index.js\nnode_modules/lodash/fp.js"),  # noise
        tool("Error: ENOENT: no such file 'old.cfg'", error=True),  # an old error, fixed since
        said("assistant", "The import took 34 ms."),  # incidental number
        said("user", "Look at config/app.toml once."),  # named once, long ago
    ]
    discussed = [said("assistant", f"RetryPolicy handles case {n}.") for n in range(8)]
    late = [
        tool("ls\nnode_modules/lodash/index.js"),
        said("user", "Now fix src/api/routes.py: it raises KeyError: 'user_id' on login."),
        tool("FAILED test_login - AssertionError: expected 200, got 500", error=True),
    ]
    middle = [e for pair in zip(FILLER, discussed, strict=False) for e in pair]
    return early + middle + late


def test_items_named_by_the_user_discussed_recent_or_in_errors_are_salient_and_noise_is_not():
    items = items_of(labelled_session())
    salient = texts_of(i for i in items if i.salient)
    assert salient == {
        "We decided to keep Postgres instead of moving to MySQL.",  # a decision the user stated
        "RetryPolicy",  # discussed in eight replies, to the end
        "src/api/routes.py",  # named by the user, recent
        "KeyError: 'user_id'",  # an error the user pasted
        "AssertionError: expected 200, got 500",  # the latest failure, though only in output
    }
    not_salient = {
        "node_modules/lodash/index.js",  # listed twice, but only in tool output
        "Error: ENOENT: no such file 'old.cfg'",  # an error, long ago and only in output
        "34 ms",  # a number the assistant mentioned in passing
        "config/app.toml",  # named once by the user, long ago
    }
    assert not_salient <= texts_of(items)


def test_the_user_naming_an_item_ranks_it_above_the_same_item_named_by_the_assistant():
    by_user = items_of([*FILLER, said("user", "Check parse_header now.")])
    by_assistant = items_of([*FILLER, said("assistant", "Check parse_header now.")])
    assert by_user[0].salience > by_assistant[0].salience


def test_a_recent_mention_ranks_above_the_same_mention_long_ago():
    mention = said("user", "Check parse_header.")
    recent = items_of([*FILLER, mention])[0].salience
    old = items_of([mention, *FILLER])[0].salience
    assert recent > old


def test_repetition_in_the_conversation_counts_but_repetition_in_tool_output_does_not():
    talked = items_of([said("assistant", f"parse_header, take {n}.") for n in range(6)])[0]
    dumped = items_of([tool(f"parse_header line {n}") for n in range(6)])[0]
    assert talked.salience > dumped.salience and not dumped.salient


def test_the_panel_score_weights_items_by_salience():
    entries = labelled_session()
    everything = " ".join(i.text for i in items_of(entries))
    assert coverage(entries, everything).score == 100
    salient_only = " ".join(i.text for i in items_of(entries) if i.salient)
    low_only = " ".join(i.text for i in items_of(entries) if not i.salient)
    assert coverage(entries, salient_only).score > 80 > coverage(entries, low_only).score


@pytest.mark.timeout(60)  # the check that scanned the document once per item took over an hour
def test_a_huge_document_against_many_items_is_checked_in_one_pass():
    entries = [said("user", " ".join(f"handler_{n}_{k}" for k in range(200))) for n in range(150)]
    document = ("Lorem ipsum handler_7_7 dolor sit amet. " * 60_000)[:2_500_000]
    result = coverage(entries, document)
    assert len(result.items) == 30_000
    assert {item.text for item in result.items if item.carried} == {"handler_7_7"}
    assert result.clipped  # past two million characters, the rest is not read


# --- the items that matter, as realistic sessions write them ---------------------------------
@pytest.mark.parametrize(
    ("written", "item"),
    [
        ("The events table holds 1.2 million rows since the backfill.", ("number", "1.2 million rows")),
        ("Give the worker container 8 GiB; it was OOM-killed at 4.", ("number", "8 GiB")),
        ("The cache entries expire after 30 minutes.", ("number", "30 minutes")),
        ("Set MAX_BATCH to 500_000 in the loader.", ("number", "500_000")),
        ("The nightly job starts at 03:15 and must end before 06:00.", ("number", "03:15")),
        ("The deploy window is 9:30 pm on Fridays.", ("number", "9:30 pm")),
        ("I tagged v2.3.1 and pushed the tag.", ("identifier", "v2.3.1")),
        ("CI runs node 18.19.0, locally it is 20.11.1.", ("identifier", "18.19.0")),
        ("src/index.ts(12,3): error TS1005: ';' expected.", ("error", "error TS1005: ';' expected")),
        ("error[E0308]: mismatched types\n --> src/main.rs:4:5", ("error", "error[E0308]: mismatched types")),
        ("Program.cs(9,13): error CS0103: The name 'cfg' does not exist in the current context",
         ("error", "error CS0103: The name 'cfg' does not exist in the current context")),
        ("ENOENT: no such file or directory, open 'config.json'",
         ("error", "ENOENT: no such file or directory, open 'config.json'")),
        ("npm ERR! code ELIFECYCLE\nnpm ERR! errno 2", ("error", "npm ERR! code ELIFECYCLE")),
        ("panic: runtime error: index out of range [3] with length 3",
         ("error", "panic: runtime error: index out of range [3] with length 3")),
        ("Ran `npm run publish`\n\nCommand exited with code 2", ("error", "exited with code 2")),
        ("make: *** [build] Error 1\nexit status 1", ("error", "exit status 1")),
        ("subprocess.CalledProcessError: ... returned non-zero exit status 128",
         ("error", "returned non-zero exit status 128")),
    ],
)  # fmt: skip
def test_numbers_versions_errors_and_exit_codes_are_items(written, item):
    assert item in concrete(written)


@pytest.mark.parametrize(
    "written",
    [
        "Agreed!",
        "Sounds good, agreed.",
        "const bgFn = () => {}",
        "  error: ColorValueSchema,",
        "/var/folders/x8/9s3_b2kd1fq/T/TemporaryItems/NSIRD_screencaptureui_kF3a/Screenshot",
        "See https://example.com for the format.",
        "I'll use ripgrep instead of grep here, it is faster.",
        "Let me check the config instead of guessing.",
        "The screenshot is /private/var/folders/x8/T/Screenshot.png",
    ],
)
def test_the_noise_of_real_sessions_is_no_item(written):
    assert concrete(written) == []


def test_an_item_made_only_of_common_words_counts_as_carried_when_it_is_written_out():
    decision = said("user", "We decided to go with what we have.")
    assert [i.text for i in items_of([decision])] == ["We decided to go with what we have."]
    carried = coverage([decision], "## Key Decisions\n- We decided to go with what we have.")
    assert carried.carried == 1
    assert coverage([decision], "## Key Decisions\n- Nothing yet.").carried == 0


def test_what_agentweb_appended_counts_as_appended_never_as_carried_by_the_model():
    document = (
        "## Goal\nStream the importer.\n\n## Work ledger\n(written by agentweb)\n\n"
        "- `src/agentweb/importer.py`: edited (verified)"
    )
    report = coverage(TRANSCRIPT, document)
    importer = next(item for item in report.items if item.text == "src/agentweb/importer.py")
    assert (importer.carried, importer.appended) == (False, True)
    alone = coverage(TRANSCRIPT, "## Goal\nStream the importer.")
    assert report.score == alone.score


def test_a_name_the_user_gives_is_an_item_and_a_called_function_is_not_one():
    items = kinds(
        extract(
            [
                "Our team lunch place is called Marigold Bistro. The theme is named "
                '"Nord Light". The loop is called by main, and parse is called parseArgs.'
            ]
        )
    )
    assert {("name", "Marigold Bistro"), ("name", "Nord Light")} <= items
    assert not [text for kind, text in items if kind == "name" and "parse" in text.lower()]


def test_a_colour_is_an_item_and_an_issue_number_is_not():
    items = kinds(extract(["Use #2E3440 and #fa0, as issue #481 asked (see #123)."]))
    assert {("number", "#2E3440"), ("number", "#fa0")} <= items
    assert not [text for _, text in items if text in ("#481", "#123")]
