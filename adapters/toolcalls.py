"""The tool-call text format, re-exported from the shared floor (:mod:`teamtr_core.toolcalls`)
so that ``from adapters.toolcalls import parse_tool_calls`` keeps working."""

from teamtr_core.toolcalls import (
    CANONICAL_CLOSE,
    CANONICAL_OPEN,
    DEFAULT_MAX_CHARS,
    MAX_DEPTH,
    NAME_RE,
    ToolCall,
    ToolCallParse,
    canonicalize_tool_calls,
    parse_tool_calls,
    parse_tool_calls_detailed,
    render_tool_call,
)

__all__ = [
    "CANONICAL_CLOSE",
    "CANONICAL_OPEN",
    "DEFAULT_MAX_CHARS",
    "MAX_DEPTH",
    "NAME_RE",
    "ToolCall",
    "ToolCallParse",
    "canonicalize_tool_calls",
    "parse_tool_calls",
    "parse_tool_calls_detailed",
    "render_tool_call",
]
