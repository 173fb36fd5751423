"""What a tool is: a typed value, as simonw/llm's `Tool` is (a name, a description, an input
schema, and the function that runs it), and the result the model reads."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..models import ChatSession


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # what it produced, kept in the entry
    images: list[dict[str, str]] = field(default_factory=list)  # {"type": "image", data, mimeType}


# An async tool's progress, as it reports it: done so far, the total (if known), and words.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


class ToolInputError(ValueError):
    """Input a tool cannot take; the message goes back to the model."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    # Given the call's input and the session it runs in; raises ToolInputError for input it
    # cannot take. A plain function runs on the database thread; an async one (an MCP tool's)
    # on the event loop, where a Cancel stops it.
    run: (
        Callable[[Any, ChatSession], ToolResult]
        | Callable[[Any, ChatSession, Progress], Awaitable[ToolResult]]
    )
    # Whether a session offers it (None: every session does); asked on the database thread.
    offered: Callable[[ChatSession], bool] | None = None
    server: str = ""  # the MCP server it comes from ("": agentweb's own)
    asks_first: bool = False  # it changes things: the user allows or denies each call

    @property
    def on_the_loop(self) -> bool:
        return inspect.iscoroutinefunction(self.run)

    @property
    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API offers it to the model."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
