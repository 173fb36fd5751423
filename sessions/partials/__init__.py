"""HTML fragments pushed over the WebSocket: the page's own partials, rendered alone.

The view renders `sessions/session.html` whole; these render one of its
`{% partialdef %}` blocks with `oob` set, so page, swap and push share markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.urls import get_script_prefix, reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from .. import handoff_review, listing, pushes, thinking
from ..blocks import Blocks
from ..models import ChatSession, Entry, ToolQuestion
from ..providers import catalog
from ..rendering import render_markdown
from ..status import StatusLine
from ..store import branch_outline
from ..todos import Todo
from ..transcript import WINDOW, window

PAGE = "sessions/session.html"


def entry(entry: Entry) -> str:
    """An entry appended to the transcript."""
    inner = render_to_string(f"{PAGE}#entry", {"entry": entry})
    return render_to_string(f"{PAGE}#appended", {"inner": inner})


def entry_again(entry: Entry) -> str:
    """An entry shown already, shown again in its place (a tool call got its result)."""
    return render_to_string(f"{PAGE}#entry", {"entry": entry, "in_place": True})


def tool_answered(caller: Entry, block: dict[str, Any]) -> str:
    """One tool call of a reply shown already, with its result now, in its place (not the
    whole reply again: a round of many calls would render it once per result)."""
    context = {"entry": caller, "block": block, "block_oob": True}
    return render_to_string(f"{PAGE}#block", context)


def tool_progress(entry_id: int, index: int, text: str) -> str:
    """A running call's progress, in its line."""
    context = {"entry_id": entry_id, "index": index, "text": text}
    return render_to_string(f"{PAGE}#tool_progress", context)


def question(asked: ToolQuestion) -> str:
    """A tool call's question: added to the page's questions while it waits, shown in its
    place once answered (the buttons give way to the answer)."""
    if asked.answer:
        return render_to_string(f"{PAGE}#question", {"question": asked, "question_oob": True})
    return render_to_string(f"{PAGE}#question_asked", {"question": asked})


def questions(open_questions: Sequence[ToolQuestion]) -> str:
    """The questions waiting for the user, replacing the page's (a tab catching up)."""
    return render_to_string(f"{PAGE}#questions", {"questions": open_questions, "oob": True})


def todo_panel(session: ChatSession, todo_list: Sequence[Todo], *, focus: str = "") -> str:
    """The todo list's panel, replacing the page's (`focus`: the control the tab whose change it
    was should focus next)."""
    context = {
        "session": session,
        "todo_list": todo_list,
        "todo_summary": todo_summary(todo_list),
        "todo_focus": focus,
        "oob": True,
    }
    return render_to_string(f"{PAGE}#todos", context)


def todo_summary(todo_list: Sequence[Todo]) -> str:
    open_items = sum(1 for todo in todo_list if todo.is_open)
    return f"{open_items} open of {len(todo_list)}" if todo_list else "none yet"


def transcript(session: ChatSession, *, before: int | None = None) -> str:
    """The whole transcript, as of the session's branch now (it moved to another branch): its
    latest window, or the window before entry `before`. A window more than a push can carry
    shows fewer of its latest entries, in proportion; the earlier ones load on demand."""
    outline, size = branch_outline(session), WINDOW
    while True:
        context = {"session": session, "oob": True, **window(outline, before, size)}
        html = render_to_string(f"{PAGE}#transcript", context)
        length = pushes.size(html)
        if length <= pushes.LIMIT or size == 1:
            return html  # (an entry too large for a push goes as a notice to reload)
        shown = len(context["entries"])
        size = max(1, min(size - 1, shown * pushes.LIMIT * 9 // (length * 10)))


def title(session: ChatSession) -> str:
    return render_to_string(f"{PAGE}#title", {"session": session, "oob": True})


def sidebar(owner: User) -> str:
    """The sidebar's groups of the owner's recent chains, for every tab of theirs (each marks
    the session it shows)."""
    groups = listing.sidebar_groups(listing.recent_chains(owner))
    return render_to_string("sessions/sidebar.html#items", {"sidebar_groups": groups, "oob": True})


def live(text: str | None, purpose: str = "", stage: str = "", thinking: str = "") -> str:
    """The streaming reply so far (None: nothing streams): its thinking, folded; its finished
    markdown blocks rendered, its open block as plain text."""
    blocks = Blocks(text or "")
    return render_to_string(
        f"{PAGE}#live",
        {
            "live_thinking": thinking,
            "live_blocks": mark_safe(render_markdown(blocks.finished)) if blocks.closed else "",
            "live_text": None if text is None else blocks.tail,
            "live_purpose": purpose,
            "live_stage": stage,
            "oob": True,
        },
    )


def delta(text: str) -> str:
    """More of the open block, as plain text."""
    return f'<div id="live-text" hx-swap-oob="beforeend">{escape(text)}</div>'


def thinking_delta(text: str) -> str:
    """More of the reply's thinking, into its folded box."""
    return f'<div id="live-thinking" hx-swap-oob="beforeend">{escape(text)}</div>'


def blocks_closed(markdown: str, tail: str) -> str:
    """Blocks that just ended, rendered, after the others; the open block's text so far."""
    return (
        f'<div id="live-blocks" hx-swap-oob="beforeend">{render_markdown(markdown)}</div>'
        f'<div id="live-text" hx-swap-oob="innerHTML">{escape(tail)}</div>'
    )


def status(session: ChatSession, line: StatusLine) -> str:
    """The status line pushed to the tabs: its pickers rendered once for what they show, for
    any session, then given this session's URLs (a prompt pushes the line twice, and they
    were half its render)."""
    context = status_context(session, line)
    prefix = get_script_prefix()
    pickers = _pickers(
        prefix,
        catalog.spec(session.model),
        session.thinking_level,
        line.generating,
        tuple(context["models"]),
        context["model_offered"],
    )
    here = context["actions"]
    for name, url in _actions(prefix, ANY_SESSION).items():  # each an attribute's whole value
        pickers = pickers.replace(f'"{url}"', f'"{here[name]}"')
    context["pickers"] = mark_safe(pickers)  # noqa: S308 - rendered; the URLs are reversed
    return render_to_string(f"{PAGE}#status", {**context, "oob": True})


# The session the pickers are rendered for once, for every session: its URLs are replaced by
# the session's own (ids count from 1).
ANY_SESSION = 0


@lru_cache(maxsize=256)  # about 1.4 KB each: a few for each model and level
def _pickers(
    prefix: str,
    model: catalog.ModelSpec,
    thinking_level: str,
    generating: bool,
    models: tuple[catalog.ModelSpec, ...],
    model_offered: bool,
) -> str:
    """The status line's model and thinking pickers, as a push shows them: without the CSRF
    field (a push has no request; the page renders its pickers with one)."""
    context = {
        "model_id": model.id,
        "thinking_level": thinking_level,
        "generating": generating,
        "models": models,
        "model_offered": model_offered,
        "thinks": not model.is_local,
        "thinking_levels": thinking.LEVELS,
        "actions": _actions(prefix, ANY_SESSION),
    }
    return render_to_string(f"{PAGE}#pickers", context)


def status_context(session: ChatSession, line: StatusLine) -> dict[str, Any]:
    """What the status line's partial reads: the line, and the session's model and window."""
    spec = catalog.spec(session.model)
    share = session.context_tokens / spec.window if spec.window else 0.0
    offered = catalog.is_offered(session.model)
    return {
        "session": session,
        "model_id": session.model,
        "thinking_level": session.thinking_level,
        "generating": line.generating,
        "generation_kind": line.generation_kind,
        "generation_started_at": line.generation_started_at,
        "queued": line.queued,
        "queue": line.queue,
        "interrupted": line.interrupted,
        "context_before": line.context_before,
        "handoff": line.handoff,
        "session_usage": line.session_usage,
        "drafts_unused": line.drafts_unused,
        "window": spec.window,
        "context_percent": round(share * 100),
        # A session handed off already says where it went on, instead of suggesting it again.
        "suggest_handoff": share >= settings.AGENTWEB_HANDOFF_SUGGEST_AT
        and not line.generating
        and not session.continued_in_id,
        # A handoff document written ahead at this leaf: /handoff switches without waiting.
        "draft_ready": session.draft_at is not None
        and session.draft_at == session.leaf_id
        and not line.generating,
        "models": catalog.offered(),
        "thinking_levels": thinking.LEVELS,
        "thinks": not spec.is_local,
        "model_offered": offered,
        "model_problem": "" if offered else catalog.unavailable_reason(session.model),
        "actions": _actions(get_script_prefix(), session.pk),
    }


@lru_cache(maxsize=4096)
def _actions(prefix: str, session_id: int) -> dict[str, str]:
    """Where the status line's pickers post: reversed once per session, not at every line (four
    reverses were a fifth of its render, and a prompt renders it twice)."""
    return {
        "model": reverse("chat:model", args=[session_id]),
        "thinking": reverse("chat:thinking", args=[session_id]),
    }


def notice(text: str, level: str = "info") -> str:
    """The notice line under the transcript saying `text`; empty, it ends the one shown."""
    return render_to_string(f"{PAGE}#notice", {"text": text, "level": level})


def help_notice(commands: Sequence[Any], prompts: Sequence[Any]) -> str:
    """/help: the slash commands, one a line, then the user's own prompts."""
    context = {"commands": commands, "prompts": prompts}
    return render_to_string(f"{PAGE}#help", context)


def redirect(url: str) -> str:
    return render_to_string(f"{PAGE}#redirect_to", {"url": url})


def composer_text(text: str) -> str:
    """The message box holding `text` again (after a rejected send)."""
    return render_to_string(f"{PAGE}#composer_text", {"text": text, "oob": True})


def composer_text_pieces(text: str) -> list[str]:
    """`composer_text(text)` as pushes that each fit in a message to the tab: the box holding
    the first piece, then each next piece appended to it (nothing typed is lost, however long:
    a piece's characters, escaped, are at most six bytes each)."""
    size = (pushes.LIMIT - 1_000) // 6
    pieces = [text[at : at + size] for at in range(0, len(text), size)] or [""]
    more = [render_to_string(f"{PAGE}#composer_more", {"text": piece}) for piece in pieces[1:]]
    return [composer_text(pieces[0]), *more]


def review(reply: Entry, document: str, model: str) -> str:
    """B14: the generated handoff document, editable, before the switch, and the model the new
    session runs on."""
    models = handoff_review.models_offered(model)
    context = {"reply": reply, "document": document, "review_models": models, "oob": True}
    return render_to_string(f"{PAGE}#review", context)


def instructions(session: ChatSession, owners: str) -> str:
    """The folded instructions at the top of a session: its owner's, then its own."""
    context = {"session": session, "instructions": owners, "oob": True}
    return render_to_string(f"{PAGE}#instructions", context)


def review_closed() -> str:
    return render_to_string(f"{PAGE}#review", {"reply": None, "oob": True})
