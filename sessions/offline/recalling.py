"""The offline model's recall: a question about words its context does not hold is looked up in
the sessions this one came from, and the entries found are quoted with links to them.

Deterministic, as the rest of the offline model: the question's longest word of four letters
or more that the conversation never used is what it looks for.
"""

from __future__ import annotations

import re
from typing import Any

from ..content import block_texts
from ..models import ChatSession
from ..providers import ToolCall

RECALL = "recall"
WORD = re.compile(r"[^\W\d_][\w-]{3,}")
COMMON = frozenset(
    (
        "what",
        "which",
        "when",
        "where",
        "does",
        "did",
        "have",
        "that",
        "this",
        "with",
        "from",
        "were",
        "they",
        "them",
        "then",
        "than",
        "there",
        "their",
        "about",
        "again",
        "into",
        "your",
        "will",
        "would",
        "could",
        "should",
        "said",
        "tell",
        "know",
        "need",
        "needs",
        "like",
        "just",
        "also",
        "only",
        "some",
        "more",
        "most",
        "much",
        "many",
        "very",
    )
)
FOUND = re.compile(r"^\[session (\d+), entry (\d+), ([^,\]]+), ([^\]]+)\] (.*)$")
INTRO = "From the earlier sessions, best match first:"


def recall_call(messages: list[dict[str, Any]]) -> ToolCall | None:
    """A `recall` call, when the last message asks a question (a `?`) about a word nothing
    earlier in the conversation holds."""
    if not messages or messages[-1]["role"] != "user":
        return None
    asked = list(block_texts(messages[-1].get("content", "")))
    question = asked[-1] if asked else ""
    if "?" not in question:
        return None
    earlier = [*asked[:-1]]
    for message in messages[:-1]:
        earlier += block_texts(message.get("content", ""))
    known = " ".join(earlier).lower()
    unknown = [
        word
        for word in WORD.findall(question)
        if word.lower() not in COMMON and word.lower() not in known
    ]
    if not unknown:
        return None
    query = max(unknown, key=len)
    return ToolCall(f"toolu_offline_recall_{len(messages)}", RECALL, {"query": query})


def quoted(result_text: str) -> str | None:
    """A recall's result as a reply: each entry quoted, with a link to it (None: the text is
    not a recall's)."""
    lines = result_text.splitlines()
    found = [match for line in lines[1:] if (match := FOUND.match(line))]
    if not found:
        return None
    reply = [INTRO]
    for match in found:
        session, entry, role, at, text = match.groups()
        link = ChatSession(pk=int(session)).url_at(int(entry))
        reply += ["", f"> {text}", f"— [session {session}, entry {entry}]({link}), {role}, {at}"]
    return "\n".join(reply)
