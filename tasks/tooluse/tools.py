"""The retail domain's tools: 16 database tools plus ``respond`` (talk to the user).

Schemas are in tau-bench's function format (``{"type": "function", "function": {name,
description, parameters}}``) with closed argument objects. ``respond`` is not run on the database:
it is how a message reaches the user (plain text does the same), see :mod:`tasks.tooluse.actions`.
"""

from __future__ import annotations

from typing import Any

from tasks.tooluse.toolbox import DEFAULT_MAX_CALL_CHARS, Tool, ToolBox
from tasks.tooluse.tools_read import READ_TOOLS
from tasks.tooluse.tools_write import WRITE_TOOLS

RESPOND = "respond"
RESPOND_MAX_CHARS = 4000

TOOLS: tuple[Tool, ...] = READ_TOOLS + WRITE_TOOLS
TOOL_NAMES: frozenset[str] = frozenset(tool.name for tool in TOOLS)
WRITE_TOOL_NAMES: frozenset[str] = frozenset(tool.name for tool in TOOLS if tool.writes)
TERMINAL_TOOL_NAMES: frozenset[str] = frozenset(tool.name for tool in TOOLS if tool.terminal)

RESPOND_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": RESPOND,
        "description": "Send a message to the user (writing plain text without a tool call does "
        "the same).",
        "parameters": {
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "description": "The message to the user.",
                    "maxLength": RESPOND_MAX_CHARS,
                }
            },
            "required": ["content"],
            "additionalProperties": False,
        },
    },
}


def make_toolbox(max_call_chars: int = DEFAULT_MAX_CALL_CHARS) -> ToolBox:
    """A :class:`ToolBox` with every database tool of the domain."""
    return ToolBox(TOOLS, max_call_chars=max_call_chars)


def tool_schemas() -> list[dict[str, Any]]:
    """Every tool's schema, ``respond`` last: what to pass as ``tools=`` to a chat template."""
    return [tool.schema() for tool in TOOLS] + [RESPOND_SCHEMA]
