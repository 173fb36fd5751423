"""The user decides (issue 53): before a tool call that changes things, the job asks, and waits
for an answer from any tab of the session (in any process: it reaches the job through its
channel), for the clock (AGENTWEB_MCP_APPROVAL_SECONDS: denied as timed out), or for Cancel
(denied, and the reply ends). "Allow for this session" answers that tool's later calls in the
session at once."""

from __future__ import annotations

import asyncio

from django.conf import settings

from foundation.database import short

from ..models import ChatSession, ToolQuestion
from ..models.questions import CANCELLED, DENY, SESSION, TIMED_OUT
from ..providers import ToolCall
from .events import Emit
from .streamer import Streamer
from .tool import Tool

DENIED = "The user denied this call: it was not run."
UNANSWERED = "Not run: the user did not answer within {seconds:g} s, so the call was denied."
REFUSED = {DENY: DENIED, CANCELLED: "The user cancelled the reply while this call waited: not run."}


class Approvals:
    """The questions one job asks, each waiting on its answer."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[str]] = {}

    def answered(self, question_id: int, answer: str) -> None:
        """An answer, as a tab's frame sent it to the job's channel (stored already)."""
        waiting = self.waiting.get(question_id)
        if waiting is not None and not waiting.done():
            waiting.set_result(answer)

    async def ask(
        self,
        session: ChatSession,
        generation_id: str,
        call: ToolCall,
        tool: Tool,
        streamer: Streamer,
        emit: Emit,
    ) -> str:
        """The user's answer to `call` of `tool`: once or session (run it), deny, timeout or
        cancelled (do not)."""
        # An MCP tool may be allowed for the session; agentweb's own (`handoff`) asks each time.
        if tool.server and await short(ToolQuestion.allowed_for_session)(session.pk, tool.name):
            return SESSION
        question = await short(ToolQuestion.objects.create)(
            session=session,
            generation_id=generation_id,
            call_id=call.id,
            tool=tool.name,
            server=tool.server,
            arguments=call.arguments,
        )
        waiting = self.waiting[question.pk] = asyncio.get_running_loop().create_future()
        await emit("tool_question", question=question)
        seconds = settings.AGENTWEB_MCP_APPROVAL_SECONDS
        try:
            answer = await streamer.during(asyncio.wait_for(waiting, seconds))
        except TimeoutError:
            answer = TIMED_OUT
        finally:
            self.waiting.pop(question.pk, None)
        answer = answer or CANCELLED
        unanswered = answer in (TIMED_OUT, CANCELLED)
        if unanswered and not await short(ToolQuestion.answer_once)(
            session.pk, question.pk, answer
        ):
            # a tab answered first (its word may not have reached this job): it stands, unless
            # the reply was cancelled, which runs nothing more
            stored = await short(ToolQuestion.objects.get)(pk=question.pk)
            answer = CANCELLED if answer == CANCELLED else stored.answer
        question.answer = answer
        await emit("tool_answered", question=question)
        return answer


def refusal(answer: str) -> str:
    """What the model reads for a call the user did not allow."""
    if answer == TIMED_OUT:
        return UNANSWERED.format(seconds=settings.AGENTWEB_MCP_APPROVAL_SECONDS)
    return REFUSED.get(answer, DENIED)
