"""`todo_write`: the tool with which the model keeps the session's todo list (sessions.todos)."""

from __future__ import annotations

from typing import Any

from .. import todos
from ..models import ChatSession
from .tool import Tool, ToolInputError, ToolResult


def write_list(arguments: Any, session: ChatSession) -> ToolResult:
    """Set the list the call gives; the result names what it holds, its details the list."""
    try:
        items = todos.parse_input(arguments)
    except todos.TodoInputError as error:
        raise ToolInputError(f"The todo list was not changed: {error}.") from error
    return ToolResult(todos.result_text(items), details={"todos": todos.as_dicts(items)})


TODO_WRITE = Tool(
    name=todos.TOOL_NAME,
    description=(
        "Replace this session's todo list with the full list given. Use it to plan work of "
        "several steps and keep it current: mark an item in_progress when you start it and "
        "done as soon as it is finished, add items you discover, remove ones that no longer "
        "apply. Send the whole list every time; the user sees it beside the chat and may "
        "edit it too."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "what to do"},
                        "state": {"type": "string", "enum": list(todos.STATES)},
                    },
                    "required": ["text", "state"],
                },
            }
        },
        "required": ["todos"],
    },
    run=write_list,
)
