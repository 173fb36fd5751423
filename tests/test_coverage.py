"""Coverage: which concrete items of the old session the handoff document carries."""

from __future__ import annotations

from sessions.coverage import coverage, extract, normalise
from sessions.models import Entry


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
