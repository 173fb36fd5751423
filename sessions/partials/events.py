"""The engine's events as the page's partials: the one place a generation's news becomes HTML.

`render` is the `Render` the consumer gives the engine; it runs once per event, in the process
that runs the job. Only `TranscriptShown` reads the database (the engine renders it off the
event loop); every other event carries what its partial shows.
"""

from __future__ import annotations

from functools import singledispatch

from django.contrib.auth.models import User

from .. import handoff, todos
from ..generation.events import (
    BlocksClosed,
    Delta,
    EntryAdded,
    Event,
    Live,
    Notice,
    QuestionShown,
    ReviewOffered,
    SidebarChanged,
    StatusShown,
    Switched,
    Thought,
    TitleChanged,
    ToolAnswered,
    ToolProgress,
    TranscriptShown,
)
from ..shapes import part
from ..transcript import answered_call
from . import (
    blocks_closed,
    delta,
    entry,
    entry_again,
    live,
    notice,
    question,
    redirect,
    review,
    sidebar,
    status,
    thinking_delta,
    title,
    todo_panel,
    tool_answered,
    tool_progress,
    transcript,
)


def render(event: Event) -> str:
    """The html every tab of the session is sent for this event."""
    return _render(event)


@singledispatch
def _render(event: object) -> str:
    raise TypeError(f"no partial for {type(event).__name__}")


@_render.register
def _(event: Delta) -> str:
    return delta(event.text)


@_render.register
def _(event: Thought) -> str:
    return thinking_delta(event.text)


@_render.register
def _(event: BlocksClosed) -> str:
    return blocks_closed(event.markdown, event.tail)


@_render.register
def _(event: Live) -> str:
    return live(event.text, event.purpose, event.stage, event.thinking)


@_render.register
def _(event: StatusShown) -> str:
    return status(event.session, event.line)


@_render.register
def _(event: Notice) -> str:
    return notice(event.text, event.level)


@_render.register
def _(event: Switched) -> str:
    return notice(handoff.STARTED, "success") + redirect(event.new_session.get_absolute_url())


@_render.register
def _(event: ReviewOffered) -> str:
    return review(event.reply, event.document, event.model)


@_render.register
def _(event: TitleChanged) -> str:
    return title(event.session)


@_render.register
def _(event: SidebarChanged) -> str:
    return sidebar(User.objects.get(pk=event.owner_id))


@_render.register
def _(event: TranscriptShown) -> str:
    return transcript(event.session, before=event.before)


@_render.register
def _(event: EntryAdded) -> str:
    """What streamed replaces the streaming reply; anything else is followed by the title (a
    first prompt gives the session its title)."""
    html = entry(event.entry)
    if event.streamed:
        return live(None) + html
    return html + title(event.session)


@_render.register
def _(event: ToolAnswered) -> str:
    """The call's line in the reply gets its result folded under it, and the todo list the
    tool set goes to the panel."""
    result, caller = event.result, event.caller
    call_id = str(part(result.data, "message").get("toolCallId"))
    caller.folded_results = {**(caller.folded_results or {}), call_id: result}
    block = answered_call(caller, call_id)
    html = tool_answered(caller, block) if block is not None else entry_again(caller)
    details = part(result.data, "message", "details")
    if "todos" in details:
        html += todo_panel(event.session, todos.from_dicts(details["todos"]))
    return html


@_render.register
def _(event: QuestionShown) -> str:
    return question(event.question)


@_render.register
def _(event: ToolProgress) -> str:
    return tool_progress(event.entry_id, event.index, event.text)
