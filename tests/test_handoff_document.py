"""The handoff document's pure parts: prompt, extraction, structure check, wrapper."""

from __future__ import annotations

from sessions import handoff
from sessions.models import Entry

from .conftest import SIX_SECTIONS


def message(role: str, *blocks: dict, kind: str = Entry.Kind.MESSAGE) -> Entry:
    return Entry(kind=kind, role=role, content=list(blocks))


def text(value: str) -> dict:
    return {"type": "text", "text": value}


FULL = """# Handoff

## Goal
Ship the parser.

## Constraints & Preferences
- No regex.

## Progress
Half done.

## Key Decisions
- tomllib.

## Critical Context
`src/parser.py`

## Next Steps
1. Tests.
"""


def test_the_sections_are_the_six_of_the_reference_agent():
    assert handoff.SECTIONS == SIX_SECTIONS  # written out, name by name, in conftest


def test_the_prompt_asks_for_the_six_sections_in_order():
    prompt = handoff.build_prompt()
    positions = [prompt.index(f"## {section}") for section in SIX_SECTIONS]
    assert positions == sorted(positions)
    assert "Additional focus" not in prompt


def test_focus_text_is_appended_as_additional_focus():
    assert handoff.build_prompt("  the database migration ").endswith(
        "\n\nAdditional focus: the database migration"
    )


def test_extraction_takes_the_last_assistant_message_and_joins_its_text_blocks():
    entries = [
        message("assistant", text("old document")),
        message("user", text("the prompt")),
        message(
            "assistant",
            text("## Goal"),
            {"type": "thinking", "thinking": "hidden"},
            {"type": "toolCall", "id": "1", "name": "x", "arguments": {}},
            text("Ship it."),
        ),
        message("", text("not a message"), kind=Entry.Kind.CUSTOM_MESSAGE),
    ]
    assert handoff.extract_document(entries) == "## Goal\nShip it."


def test_extraction_of_a_branch_without_assistant_messages_is_empty():
    assert handoff.extract_document([message("user", text("hi"))]) == ""


def test_a_complete_document_passes_the_structure_check():
    report = handoff.check_structure(FULL)
    assert report.ok and report.warnings() == []


def test_missing_and_empty_sections_are_reported_by_name():
    document = FULL.replace("## Key Decisions\n- tomllib.\n", "").replace("Half done.", "")
    report = handoff.check_structure(document)
    assert report.missing == ("Key Decisions",)
    assert report.empty == ("Progress",)
    assert report.warnings() == ["Missing section: Key Decisions", "Empty section: Progress"]


def test_headings_match_whatever_their_level_casing_emphasis_or_and():
    document = "\n".join(f"### **{s.upper().replace('&', 'and')}**\ntext" for s in SIX_SECTIONS)
    assert handoff.check_structure(document).ok


def test_a_section_holding_only_subheadings_with_text_is_not_empty():
    document = FULL.replace("Half done.", "### Backend\nDone.")
    assert handoff.check_structure(document).ok


def test_the_wrapper_is_the_reference_agents_exact_text():
    assert handoff.wrap("DOC") == (
        "<handoff-context>\nDOC\n</handoff-context>\n\n"
        "The above is a handoff document from a previous session. "
        "Use this context to continue the work seamlessly."
    )
    assert handoff.unwrap(handoff.wrap("DOC")) == "DOC"


def test_the_guard_needs_two_messages():
    import pytest

    with pytest.raises(handoff.NothingToHandOff, match=r"Nothing to hand off \(no messages yet\)"):
        handoff.check_guard(1)
    handoff.check_guard(2)


def test_a_comment_line_in_a_code_fence_is_not_a_heading():
    document = FULL.replace(
        "## Critical Context\n`src/parser.py`",
        "## Critical Context\n```sh\n# Next Steps\n# Goal\nmake test\n```",
    ).replace("## Next Steps\n1. Tests.", "")
    report = handoff.check_structure(document)
    assert report.missing == ("Next Steps",)  # the fenced "# Next Steps" is code
    assert report.empty == ()  # Critical Context holds a code block


def test_a_setext_heading_counts_and_an_indented_hash_does_not():
    document = FULL.replace("## Goal\nShip the parser.", "Goal\n----\nShip the parser.")
    assert handoff.check_structure(document).ok
    indented = FULL.replace("## Progress\nHalf done.", "").replace(
        "## Goal\nShip the parser.", "## Goal\n\n    ## Progress\n\nShip the parser."
    )
    assert handoff.check_structure(indented).missing == ("Progress",)  # an indented code block
