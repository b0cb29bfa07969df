"""How a team message becomes an action, and how the environment's answer is written.

The mapping (one action per message, like tau-bench's one action per step):

* a message holding a tool call in any format the project's normaliser reads
  (``teamtr_core.toolcalls``: canonical ``<tool_call>{"arguments":...,"name":...}</tool_call>``,
  Hermes/Qwen, Llama, OpenAI, Mistral, fenced JSON) runs its FIRST call; text around it is not
  sent to the user, further calls are ignored (and said so);
* a ``respond`` call, ``{"name": "respond", "arguments": {"content": "..."}}``, sends ``content``
  to the user;
* a malformed call (broken JSON after ``<tool_call>``, a ``<tool_call>`` tag without a JSON
  object, a call without a name, ...) is an invalid call: an error goes back to the team, nothing runs, nothing reaches the user;
  so is a call still open after the first :data:`MAX_SCAN_CHARS` characters (only those are
  read), whose error says it is too long and names the limit;
* any other message is sent to the user as it is.

The environment answers with exactly one of (:func:`render_feedback`)::

    Tool get_order_details returned: {...}
    Tool cancel_pending_order failed: Error: ...
    Invalid tool call: Error: ...
    User: ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator

from tasks.tooluse.tools import RESPOND, RESPOND_SCHEMA
from teamtr_core.toolcalls import CANONICAL_OPEN, parse_tool_calls_detailed

MAX_SCAN_CHARS = 65_536
ActionKind = Literal["tool", "message", "invalid"]
_RESPOND_VALIDATOR = Draft202012Validator(RESPOND_SCHEMA["function"]["parameters"])

TOOL_OK = "Tool {name} returned: "
TOOL_FAILED = "Tool {name} failed: "
INVALID = "Invalid tool call: "
USER = "User: "


@dataclass(frozen=True)
class AgentAction:
    """What one team message does.

    Attributes:
        kind: ``"tool"`` (run ``name`` with ``arguments``), ``"message"`` (``text`` goes to the
            user) or ``"invalid"`` (``text`` is the error).
        name: the tool name (tool calls and rejected respond calls).
        arguments: the tool arguments (tool calls).
        text: the message to the user, or the error.
        ignored_calls: further tool calls in the message that do not run.
    """

    kind: ActionKind
    text: str = ""
    name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    ignored_calls: int = 0


def parse_agent_message(text: str, max_scan_chars: int = MAX_SCAN_CHARS) -> AgentAction:
    """The action a team message stands for (see the module docstring). Never raises."""
    calls, errors = parse_tool_calls_detailed(text, max_chars=max_scan_chars)
    errors = [e for e in errors if not e.startswith("text truncated")]
    if calls:
        call, ignored = calls[0], len(calls) - 1
        arguments = call.arguments_dict()
        if call.name != RESPOND:
            return AgentAction("tool", name=call.name, arguments=arguments, ignored_calls=ignored)
        respond_errors = [e.message[:160] for e in _RESPOND_VALIDATOR.iter_errors(arguments)]
        if respond_errors:
            return AgentAction(
                "invalid",
                "Error: invalid arguments for respond: " + "; ".join(respond_errors),
                RESPOND,
            )
        return AgentAction("message", str(arguments["content"]), ignored_calls=ignored)
    if not errors and CANONICAL_OPEN in text[:max_scan_chars]:
        errors = ["no JSON object after <tool_call>"]
    if any(": too long: " in e for e in errors):
        return AgentAction(
            "invalid",
            f"Error: tool call too long: it runs past the first {max_scan_chars} characters of "
            "the message, which is all that is read. Write shorter calls as "
            '<tool_call>{"name": "...", "arguments": {...}}</tool_call>.',
        )
    if errors:
        return AgentAction(
            "invalid",
            "Error: malformed tool call (" + "; ".join(errors[:3]) + "). Write calls as "
            '<tool_call>{"name": "...", "arguments": {...}}</tool_call>.',
        )
    return AgentAction("message", text.strip())


def render_feedback(
    kind: Literal["ok", "failed", "invalid", "user"], text: str, name: str = ""
) -> str:
    """The environment's message for one action's outcome."""
    if kind == "ok":
        return TOOL_OK.format(name=name) + text
    if kind == "failed":
        return TOOL_FAILED.format(name=name) + text
    if kind == "invalid":
        return INVALID + text
    return USER + text
