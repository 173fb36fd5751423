"""The session page's WebSocket: a thin router between the browser and the generation engine.

It forwards the job's events in order: each carries (generation, seq); an event
that does not follow the last one forwarded triggers a resync (database state,
then the job's snapshot), so a tab never shows a gap or a duplicate (SPEC B7).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse

from foundation.database import short

from . import commands, generation, handoff_review, partials, pushes, sign_ins, store, tabs
from .commands import session as session_commands
from .consuming import GONE, LeanConsumer
from .forms import Frame, FrameError, parse_frame
from .frame_budget import FrameBudget
from .mcp import prompts as mcp_prompts
from .mcp.config import PREFIX as MCP_PREFIX
from .mcp.hub import warm as warm_mcp_servers
from .models import ChatSession, PromptTemplate, Refused
from .numbers import whole_number
from .partials import announce, catch_up
from .partials.events import render

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = GONE  # 4404
SNAPSHOT_PATIENCE = 2.0  # seconds to wait for a job's snapshot before resyncing again


class SessionConsumer(LeanConsumer):
    session: ChatSession

    async def connect(self) -> None:
        self.joined = False
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session_id = whole_number(self.scope["url_route"]["kwargs"]["session_id"])
        if session_id is None:  # more digits than any id: no session of anyone's
            await self.close(code=CLOSE_NOT_FOUND)
            return
        login = self.scope["session"].session_key or ""
        signed_in, session = await database_sync_to_async(_opening)(login, user, session_id)
        if not signed_in:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session = session
        self.group = tabs.session_group(session.pk)
        self.after = _query_int(self.scope, "after")
        self.gen: str | None = None
        self.seq = 0
        self.budget = FrameBudget(
            settings.AGENTWEB_FRAMES_PER_SECOND, settings.AGENTWEB_FRAME_BURST
        )
        self.awaiting_snapshot_since = 0.0
        self.generating_on = ""  # the channel of the session's generation, as a frame last read
        self.standing: tuple[bool, str | None] = (True, "")  # the last check: signed in, channel
        self.user_id = user.pk
        self.user_group = tabs.user_group(user.pk)
        self.login = login
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(self.user_group, self.channel_name)
        self.joined = True
        await self.accept()
        warm_mcp_servers()  # the servers' prompts reach the `/` menu of the next page
        await self.resync()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Each message goes straight to its handler, without Channels' `aclose_old_connections()`
        first: that is a hop to the one database thread for every message (every frame, every
        relayed batch), and every handler here that touches the database does it through
        `database_sync_to_async`, which closes old connections itself before and after."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_discard(self.user_group, self.channel_name)

    async def user_logout(self, event: dict[str, Any]) -> None:
        """The sign-in this socket was opened with has ended: no more transcript for it."""
        if not event["login"] or event["login"] == self.login:
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def user_recheck(self, event: dict[str, Any]) -> None:
        """The password changed: only the sign-in that changed it goes on (under a new key)."""
        self.login = event["renamed"].get(self.login, self.login)
        if not await database_sync_to_async(sign_ins.holds)(self.login, self.user_id):
            await self.close(code=CLOSE_UNAUTHENTICATED)

    async def session_deleted(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["html"])
        await self.close(code=CLOSE_NOT_FOUND)

    async def may_act(self) -> bool:
        """Before a frame is acted on: the sign-in still holds (Django's rules: not signed out,
        not expired, the password unchanged) and the session is not deleted."""
        if await short(self.stands)():
            return True
        await self.stand_down()
        return False

    def stands(self) -> bool:
        """The frame's check (a database call): whether this socket may act now."""
        # The sign-in, and the session's generation channel ("" none runs, None not kept).
        self.standing = sign_ins.holds_beside(self.login, self.user_id, self.session.pk)
        signed_in, channel = self.standing
        self.generating_on = channel or ""  # where a Cancel goes, as just read
        return signed_in and channel is not None

    async def stand_down(self) -> None:
        """The check said no: the socket closes, saying why."""
        signed_in, channel = self.standing
        if not signed_in:
            await self.close(code=CLOSE_UNAUTHENTICATED)
        elif channel is None:
            await self.session_deleted({"html": partials.notice(announce.DELETED, "error")})

    # --- from the browser ------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = parse_frame(text_data)
        except FrameError as error:
            await self.refuse(error.reason, error.text)
            return
        if frame.action != "cancel" and not self.budget.take():  # Cancel always goes through
            await self.refuse(TOO_FAST, frame.message)
            return
        try:
            if _a_prompt(frame):  # checked in the prompt's own database call
                await self.prompt(frame.message, frame.attachments)
            elif await self.may_act():
                await self.act(frame)
        except Refused as refused:  # what the user cannot do now, said in one place
            await self.refuse(str(refused), frame.message)
        except Exception:  # a fault below (the database, a library): said, and the text kept
            log.exception("session %s: a %s frame failed", self.session.pk, frame.action)
            await self.refuse(FRAME_FAILED, frame.message)

    async def act(self, frame: Frame) -> None:
        if frame.action == "cancel":
            if not await generation.cancel(self.session.pk, self.generating_on):
                await self.send(text_data=partials.notice("Nothing is running.", "info"))
        elif frame.action == "handoff_confirm":
            await self.confirm_handoff(frame)
        elif frame.action in ("queue_edit", "queue_remove", "continue"):
            if refusal := await generation.on_entry(self.session, frame, render):
                raise Refused(refusal)
        elif frame.action in ("edit", "regenerate"):
            text = frame.message if frame.action == "edit" else None
            entry_id = frame.entry or 0
            if refusal := await generation.branch_and_reply(self.session, entry_id, text, render):
                # The edited text stays in its own box, unsent.
                await self.send(text_data=partials.notice(refusal, "error"))
        elif frame.action == "answer":  # a tool call's question: Allow once / for the session, Deny
            await generation.answer(
                self.session.pk, frame.question or 0, frame.answer, self.generating_on
            )
        elif frame.action == "handoff_discard":
            await database_sync_to_async(handoff_review.discard)(self.session.pk)
            await tabs.show(self.session.pk, partials.review_closed())  # every tab's panel
            await generation.start_if_queued(self.session, render)  # prompts that waited for it
        else:
            await self.submit(frame.message)

    async def refuse(self, reason: str, text: str = "") -> None:
        """Say why a frame was not taken, and put its text back into the message box (in
        pieces, when it is more than one message to the tab can carry)."""
        first, *rest = partials.composer_text_pieces(text) if text else [""]
        await self.send(text_data=partials.notice(reason, "error") + first)
        for piece in rest:
            await self.send(text_data=piece)

    async def submit(self, text: str) -> None:
        """A message from the box: a slash command (each of the registry's, by `COMMANDS`),
        one of the user's prompt templates, or a prompt. `Refused` says why not."""
        parsed = commands.parse(text)
        if isinstance(parsed, commands.UnknownCommand):  # perhaps one of the user's templates
            names = await database_sync_to_async(PromptTemplate.names_of)(self.session.owner_id)
            parsed = commands.parse(text, template_names=names)
        if isinstance(parsed, commands.UnknownCommand) and parsed.name.startswith(MCP_PREFIX):
            text = await mcp_prompts.text_of(parsed.name, parsed.args)  # a server's prompt
            await self.prompt(text, checked=True)
            return
        if isinstance(parsed, commands.UnknownCommand):
            raise Refused(parsed.message)
        if isinstance(parsed, commands.Prompt):
            await self.prompt(text, checked=True)
            return
        await getattr(self, COMMANDS[parsed.name])(parsed)

    async def show_help(self, parsed: commands.CommandCall) -> None:
        prompts = await database_sync_to_async(PromptTemplate.of)(self.session.owner_id)
        await self.send(text_data=partials.help_notice(list(commands.REGISTRY.values()), prompts))

    async def hand_off(self, parsed: commands.CommandCall) -> None:
        """/handoff, or /compact: the same document, the session itself going on from it."""
        in_place = parsed.name == "compact"
        model, focus = session_commands.handoff_arguments(parsed.args, in_place=in_place)
        started = await generation.start_handoff(self.session, focus, render, model, in_place)
        if started.refusal:
            raise Refused(started.refusal)
        if started.busy:
            await self.send(text_data=partials.notice(started.busy, "warning"))

    async def prompt(
        self, text: str, files: tuple[int, ...] = (), *, checked: bool = False
    ) -> None:
        """A prompt for the model, with the `files` attached; the frame's check made in the
        prompt's own database call (by the claim's statement, once this sign-in has held)
        unless it was `checked` already."""
        check = None if checked else self.stands
        held = None if checked else sign_ins.held(self.login, self.user_id)
        outcome = await generation.submit(self.session, text, render, check, held, files)
        if outcome.unchecked:
            await self.stand_down()
        elif outcome.refusal:
            raise Refused(outcome.refusal)
        elif outcome.queued is not None:
            notice = partials.notice("Queued: it will be sent when the current reply ends.")
            await self.send(text_data=notice)
            await tabs.show(self.session.pk, render(outcome.queued))
            generation.watch(self.session.pk, render)  # its holder may have died

    async def run_command(self, parsed: commands.CommandCall) -> None:
        """/thinking, /model, /rename, /new, /export, /tree: what their buttons do."""
        outcome = await database_sync_to_async(session_commands.run)(
            self.session.pk, parsed.name, parsed.args
        )
        if outcome.notice:
            await self.send(text_data=partials.notice(outcome.notice))
        if outcome.goto is not None:
            url = reverse(f"chat:{outcome.goto.page}", args=[outcome.goto.session_id])
            await self.send(text_data=partials.redirect(url))
        if outcome.renamed:
            await database_sync_to_async(announce.title)(self.session.pk)
        if outcome.instructed:
            await database_sync_to_async(announce.instructions)(self.session.pk)
        if outcome.entry is not None:
            await database_sync_to_async(announce.entry)(self.session.pk, outcome.entry)

    async def confirm_handoff(self, frame: Frame) -> None:
        result = await generation.confirm_handoff(
            self.session, frame.entry or 0, frame.document, frame.model
        )
        if isinstance(result, str):
            await self.send(text_data=partials.notice(result, "error"))
            return
        html = partials.redirect(result.get_absolute_url())
        await self.channel_layer.group_send(self.group, {"type": "session.update", "html": html})
        await generation.start_if_queued(result, render)  # the prompts that waited moved with it

    # --- from the job and other tabs -------------------------------------------
    async def agent_event(self, event: dict[str, Any]) -> None:
        if event["gen"] == self.gen and event["seq"] <= self.seq:
            return  # already shown (a snapshot covered it)
        follows = (event["gen"] == self.gen and event["seq"] == self.seq + 1) or (
            event["seq"] == 1 and event["gen"] != self.gen
        )
        if not follows:
            # Out of step: resync, unless a snapshot asked for a moment ago is on its way (the
            # job's last event says it never will be: the job ended before it read the request).
            waited = time.monotonic() - self.awaiting_snapshot_since
            if waited > SNAPSHOT_PATIENCE or event.get("last"):
                await self.resync()
            return
        self.gen, self.seq = event["gen"], event["seq"]
        # What was published ahead of the event comes first, in the same frame; an entry this
        # tab shows already (a snapshot or the page had it) is left out.
        parts = [*event.get("ahead", ()), (event["entry"], event["html"])]
        await self.push(*(html for entry, html in parts if self.shows_new(entry)))

    def shows_new(self, entry: int) -> bool:
        """Whether a part of an event is new to this tab: not an entry it shows already."""
        if entry and entry <= self.after:
            return False
        self.after = max(self.after, entry)
        return True

    async def generation_snapshot(self, event: dict[str, Any]) -> None:
        if event["session"] != self.session.pk or (
            event["gen"] == self.gen and event["seq"] <= self.seq
        ):
            return
        self.gen, self.seq = event["gen"], event["seq"]
        self.awaiting_snapshot_since = 0.0
        entries = [h for entry_id, h in event["entries"] if entry_id > self.after]
        self.after = max([self.after, *(entry_id for entry_id, _ in event["entries"])])
        await self.push(*entries, event["html"])

    async def push(self, *parts: str) -> None:
        """`parts` (each swapped by itself) in as few messages as daphne sends (`pushes`)."""
        for message in pushes.packed(parts, _too_large):
            await super().send(text_data=message)

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        """A message daphne would refuse to send (and close the socket for) goes as a notice to
        reload (`pushes`)."""
        if text_data:
            text_data = next(pushes.packed([text_data], _too_large))
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

    async def session_resync(self, event: dict[str, Any]) -> None:
        await self.resync()

    async def session_update(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["html"])

    async def session_entry(self, event: dict[str, Any]) -> None:
        """An entry added outside a generation; shown once, whatever a resync already sent."""
        if event["entry"] > self.after:
            self.after = event["entry"]
            await self.send(text_data=event["html"])

    async def resync(self) -> None:
        """Bring the page up to date from the database, then from the running job if any.

        At most CATCH_UP_LIMIT entries, rendered CATCH_UP_PAGE at a time, each page in a call
        of its own: the one database thread every socket shares is never held for long.
        """
        state = await database_sync_to_async(catch_up.state)(self.session.pk, self.after)
        if state is None:  # deleted meanwhile (another tab, a chain's delete): said, and closed
            await self.session_deleted({"html": partials.notice(announce.DELETED, "error")})
            return
        if state["skipped"]:
            await self.send(
                text_data=partials.notice(catch_up.skipped(state["skipped"]), "warning")
            )
        for start in range(0, len(state["newer"]), catch_up.PAGE):
            page = state["newer"][start : start + catch_up.PAGE]
            await self.push(*await database_sync_to_async(catch_up.rendered)(page))
        self.after = state["after"]
        await self.send(text_data=state["status"])
        if state["channel"]:
            self.awaiting_snapshot_since = time.monotonic()
            await generation.request_snapshot(state["channel"], self.channel_name)
        if state["claimed"]:  # its holder may have died
            generation.watch(self.session.pk, render, holder=state["claimed"])


# Every slash command of the registry, and the handler that runs it: one table, exhaustive (a
# test fails for a command registered without a handler, which would reach the model).
COMMANDS: dict[str, str] = {
    "help": "show_help",
    "handoff": "hand_off",
    "compact": "hand_off",
    **dict.fromkeys(session_commands.NAMES, "run_command"),
}


def _a_prompt(frame: Frame) -> bool:
    """A message for the model (not a command, nor perhaps one of the user's templates)."""
    return frame.action == "send" and isinstance(commands.parse(frame.message), commands.Prompt)


def _opening(login: str, user: User, session_id: int) -> tuple[bool, ChatSession | None]:
    """At connect: the sign-in holds by the frames' own check (which then knows it: the first
    frame costs no more than the next), and the session if it is the user's."""
    return sign_ins.holds(login, user.pk), store.owned_session(user, session_id)


TOO_FAST = "Too many messages at once: wait a moment, then send again."
FRAME_FAILED = (
    "agentweb failed to take that message (the server's log has the error): it is back in the "
    "box; send it again to retry."
)


@functools.cache
def _too_large() -> str:
    return partials.notice(pushes.TOO_LARGE, "warning")


def _query_int(scope: dict[str, Any], name: str) -> int:
    values = parse_qs(scope.get("query_string", b"").decode(errors="replace")).get(name, ["0"])
    return whole_number(values[0]) or 0
