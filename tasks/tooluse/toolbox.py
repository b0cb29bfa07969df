"""Tools as data: a JSON schema per tool (tau-bench's function format), strict validation and
atomic execution on a per-episode database.

Every call goes through :meth:`ToolBox.execute`:

1. the tool must exist (else ``unknown_tool``);
2. the arguments must be a JSON object of at most ``max_call_chars`` characters of canonical JSON
   (else ``invalid``);
3. they must validate against the tool's schema: types, required fields, enums, string and array
   length caps, and no extra fields (``additionalProperties: false``) (else ``invalid``);
4. a tool that writes runs on copies of the rows it reads (a :class:`~tasks.tooluse.db.Transaction`)
   that are written back only if the tool succeeded (its result does not start with
   ``"Error"``); an exception inside a tool is an error result, never a crash.

So a rejected or failing call leaves the database exactly as it was. Tools are pure functions of
the database and their arguments: none touches files, the network or processes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from jsonschema import Draft202012Validator

from tasks.tooluse.db import Database, Transaction, canonical_json

DEFAULT_MAX_CALL_CHARS = 8192
Outcome = Literal["ok", "tool_error", "invalid", "unknown_tool"]


@dataclass(frozen=True)
class Tool:
    """One tool.

    Attributes:
        name: the function name models call.
        description: what it does, shown to the team.
        properties: JSON Schema ``properties`` of the arguments object.
        required: required argument names.
        invoke: ``invoke(db, **arguments) -> str``: a JSON string (or plain text) on success,
            ``"Error: ..."`` on failure.
        writes: whether it may change the database. Then it runs in a
            :class:`~tasks.tooluse.db.Transaction`: each table is a row-copying view supporting
            ``get``, ``[]``, ``in`` and item assignment (no iteration), committed on success.
        terminal: whether calling it ends the episode (``transfer_to_human_agents``).
    """

    name: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...]
    invoke: Callable[..., str]
    writes: bool = False
    terminal: bool = False
    _validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))
        object.__setattr__(self, "required", tuple(self.required))
        Draft202012Validator.check_schema(self.parameters())
        object.__setattr__(self, "_validator", Draft202012Validator(self.parameters()))

    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments object (closed: no extra fields)."""
        return {
            "type": "object",
            "properties": json.loads(json.dumps(dict(self.properties))),
            "required": list(self.required),
            "additionalProperties": False,
        }

    def schema(self) -> dict[str, Any]:
        """The tau-bench / OpenAI function schema ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }

    def validation_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """Every schema violation of ``arguments``, one short line each (empty if valid)."""
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        out = []
        for error in errors:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            out.append(f"{where}: {_clip(error.message, 160)}")
        return out


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call.

    Attributes:
        name: the tool called (as written).
        outcome: ``"ok"``, ``"tool_error"`` (the tool refused, e.g. order not found),
            ``"invalid"`` (arguments rejected before running) or ``"unknown_tool"``.
        text: the tool's result, or the error message; starts with ``"Error"`` unless ok.
        terminal: the call ended the episode.
    """

    name: str
    outcome: Outcome
    text: str
    terminal: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class ToolBox:
    """A set of tools with validation and atomic execution.

    Args:
        tools: the tools; names must be unique.
        max_call_chars: calls whose arguments exceed this many characters of canonical JSON are
            rejected before validation (a cap on payload size).
    """

    def __init__(self, tools: Iterable[Tool], max_call_chars: int = DEFAULT_MAX_CALL_CHARS) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self.tools[tool.name] = tool
        self.max_call_chars = max_call_chars

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's function schema, in registration order."""
        return [tool.schema() for tool in self.tools.values()]

    def check(self, name: str, arguments: object) -> ToolOutcome | None:
        """Validates a call without running it: ``None`` if valid, else the rejection."""
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return ToolOutcome(
                name, "unknown_tool", f"Error: unknown tool {_clip(name, 64)!r}; tools: {known}"
            )
        if not isinstance(arguments, Mapping):
            return ToolOutcome(name, "invalid", "Error: arguments must be a JSON object")
        try:
            size = len(canonical_json(arguments))
        except (TypeError, ValueError, RecursionError):
            return ToolOutcome(name, "invalid", "Error: arguments are not JSON values")
        if size > self.max_call_chars:
            return ToolOutcome(
                name,
                "invalid",
                f"Error: arguments of {name} are {size} characters; the limit is "
                f"{self.max_call_chars}",
            )
        errors = tool.validation_errors(arguments)
        if errors:
            return ToolOutcome(
                name, "invalid", f"Error: invalid arguments for {name}: " + "; ".join(errors[:5])
            )
        return None

    def execute(self, db: Database, name: str, arguments: object) -> ToolOutcome:
        """Validates and runs one call; the database changes only if a writing tool succeeded."""
        rejected = self.check(name, arguments)
        if rejected is not None:
            return rejected
        tool = self.tools[name]
        assert isinstance(arguments, Mapping)
        kwargs = json.loads(canonical_json(arguments))  # a private copy the tool may mutate
        transaction = Transaction(db) if tool.writes else None
        work = transaction.view() if transaction is not None else db
        try:
            text = tool.invoke(work, **kwargs)
        except Exception as exc:  # a tool bug or a malformed database row: an error result
            text = f"Error: {type(exc).__name__}: {_clip(str(exc), 200)}"
        if not isinstance(text, str):
            text = json.dumps(text)
        if text.startswith("Error"):
            return ToolOutcome(name, "tool_error", text)
        if transaction is not None:
            transaction.commit()
        return ToolOutcome(name, "ok", text, terminal=tool.terminal)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
