"""The slash commands that are not generations: /thinking, /model, /rename, /new, /export and
/tree do what their buttons do. Each returns a typed outcome; the consumer shows it."""

from __future__ import annotations

from dataclasses import dataclass

from .. import thinking
from ..models import ChatSession, Entry, Refused
from ..providers import catalog

NAMES = frozenset({"thinking", "model", "rename", "instructions", "new", "export", "tree"})
MODEL_BUSY = "Wait for the reply to end (or cancel it) to change the model."
LEVELS_WORDS = "off, low, medium or high"
THINKING_BUSY = "Wait for the reply to end (or cancel it) to change the thinking level."


@dataclass(frozen=True)
class Goto:
    """A page the tab that typed the command goes to: a page of the app's URLs (`chat:<page>`),
    for a session."""

    page: str  # session, tree, export_md or export_jsonl
    session_id: int


@dataclass(frozen=True)
class Outcome:
    """What a command did (it raises `Refused` when it cannot): a notice or a page for the tab
    that typed it, and what every tab of the session shows."""

    notice: str = ""
    goto: Goto | None = None
    renamed: bool = False  # every tab shows the session's new title
    instructed: bool = False  # every tab shows the session's new instructions
    entry: Entry | None = None  # every tab shows this new entry (a model or thinking change)


def run(session_id: int, name: str, args: str) -> Outcome:
    """Run command /`name` with `args` on the session."""
    session = ChatSession.objects.select_related("owner").get(pk=session_id)
    if name == "thinking":
        return _thinking(session, args.lower())
    if name == "model":
        return _model(session, args)
    if name == "rename":
        if refusal := session.rename(args):
            raise Refused(refusal)
        return Outcome(renamed=True)
    if name == "instructions":
        return _instructions(session, args)
    if name == "new":
        new = ChatSession.objects.create(owner=session.owner, model=catalog.default_model())
        return Outcome(goto=Goto("session", new.pk))
    if name == "export":
        fmt = (args or "md").lower().removeprefix(".")
        if fmt not in ("md", "jsonl"):
            raise Refused(f"Export as md or jsonl, not “{args}”.")
        return Outcome(goto=Goto(f"export_{fmt}", session_id))
    if name == "tree":
        return Outcome(goto=Goto("tree", session_id))
    raise ValueError(f"not a session command: /{name}")


INSTRUCTIONS_NONE = (
    "This session has no instructions of its own. Set them with /instructions and their text."
)


def _instructions(session: ChatSession, text: str) -> Outcome:
    """/instructions: shown; /instructions clear: none; /instructions <text>: set. Every
    request of the session begins with them (after the owner's), from its next one."""
    if not text.strip():
        if not session.instructions:
            return Outcome(notice=INSTRUCTIONS_NONE)
        return Outcome(notice=f"This session's instructions: {session.instructions}")
    cleared = text.strip().lower() == "clear"
    if refusal := session.set_instructions("" if cleared else text):
        raise Refused(refusal)
    said = "cleared" if cleared else "set: every request of this session now begins with them"
    return Outcome(notice=f"This session's instructions are {said}.", instructed=True)


def thinking_refusal(session: ChatSession, level: str) -> str:
    """Why the session's thinking level cannot become `level` now (empty: it can)."""
    if level not in thinking.LEVELS:
        return thinking.unknown(level)
    if session.is_generating:
        return THINKING_BUSY
    return ""


def _thinking(session: ChatSession, level: str) -> Outcome:
    if not level:
        level = session.thinking_level
        return Outcome(
            notice=f"Thinking level: {level}. Set it with /thinking off, low, medium or high."
        )
    if refusal := thinking_refusal(session, level):
        raise Refused(refusal)
    if level == session.thinking_level:
        return Outcome()
    return Outcome(entry=session.change_thinking(level))


def model_named(wanted: str) -> str:
    """The id of the offered model `wanted` names (its id or its label, any case); `Refused`
    with the list of those offered when it names none."""
    offered = catalog.offered()
    chosen = next((m.id for m in offered if wanted.lower() in (m.id.lower(), m.label.lower())), "")
    if not chosen:
        names = ", ".join(model.id for model in offered)
        raise Refused(f"Unknown model “{wanted}”: choose one of {names}.")
    return chosen


def handoff_arguments(args: str, *, in_place: bool = False) -> tuple[str, str]:
    """`/handoff [--model <id>] [focus]`: the new session's model ("": the session's own) and
    the focus; `/compact [focus]` (`in_place`): the focus alone."""
    words = args.split(maxsplit=2)
    if in_place or not words or words[0] != "--model":
        return "", args.strip()
    if len(words) < 2:
        raise Refused(HANDOFF_MODEL)
    return model_named(words[1]), words[2].strip() if len(words) > 2 else ""


HANDOFF_MODEL = "Name the model after --model: /handoff --model <id> [focus]."


def _model(session: ChatSession, wanted: str) -> Outcome:
    offered = catalog.offered()
    names = ", ".join(model.id for model in offered)
    if not wanted:
        current = next((m.label for m in offered if m.id == session.model), session.model)
        return Outcome(notice=f"Model: {current}. Change it with /model and one of: {names}.")
    chosen = model_named(wanted)
    if session.is_generating:
        raise Refused(MODEL_BUSY)
    if chosen == session.model:
        return Outcome()
    return Outcome(entry=session.change_model(chosen))
