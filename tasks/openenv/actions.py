"""Actions and observations of an OpenEnv environment as text: a message read as an action against
the action's JSON schema (:func:`parse_action`), an observation shown as context text
(:func:`render_observation`). No message reaches ``eval``: a JSON object is read with
``json.loads`` and checked by ``jsonschema``; every form of an action, the one-field forms
included, is checked against the whole schema (its ``minimum``, ``maximum``, ``maxLength``, ...)
before it is stepped, so a served environment and one in process refuse it with the same reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_JSON_CHARS = 100_000
"""The longest JSON object an action is read from."""

MAX_NUMBER_DIGITS = 30
"""The most digits of the number a one-number action is read from (a longer one is refused, not
converted: ``int`` and ``float`` of a 5,000-digit string raise or overflow)."""

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RESERVED = ("metadata",)  # OpenEnv's own fields of every action and observation


def action_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The action's own fields (OpenEnv's ``metadata`` left out), name -> JSON schema."""
    return {k: v for k, v in schema.get("properties", {}).items() if k not in _RESERVED}


def schema_errors(schema: object, source: str) -> list[str]:
    """Why ``schema`` (read from ``source``) is not an action's JSON schema; none: it is one.

    Checked once, when the task is made, so that a server's garbage fails there and not at the
    first action of a run.
    """
    import jsonschema

    if not isinstance(schema, dict):
        return [f"{source}: expected the action's JSON schema (an object), got {_kind(schema)}"]
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"{source}: not a valid JSON schema ({exc.message[:300]})"]
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not all(
        isinstance(v, dict) for v in properties.values()
    ):
        return [f"{source}: expected an object schema with 'properties', got {str(schema)[:200]}"]
    return []


def _kind(value: object) -> str:
    return f"{type(value).__name__} {str(value)[:100]!r}"


def _fit(action: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """Why ``action`` does not fit ``schema``, or ``None``."""
    import jsonschema

    try:
        jsonschema.validate(action, schema)
    except jsonschema.ValidationError as exc:
        return exc.message[:300]
    return None


def _json_object(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object of ``text`` (a fenced block, else its first ``{`` to its last ``}``) if
    it fits ``schema``; else ``(None, the problem)``, or ``(None, None)`` when there is none."""
    candidate = _FENCE.search(text)
    raw = candidate[1] if candidate else text[text.find("{") : text.rfind("}") + 1]
    if not raw:
        return None, None
    if len(raw) > MAX_JSON_CHARS:
        return None, f"its JSON is over {MAX_JSON_CHARS} characters"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, a 5,000-digit int, deep nesting
        return None, f"its JSON does not parse ({getattr(exc, 'msg', str(exc))[:200]})"
    if not isinstance(data, dict):
        return None, "its JSON is not an object"
    why = _fit(data, schema)
    return (data, None) if why is None else (None, f"its JSON does not fit the action: {why}")


def _one_field(
    text: str, name: str, kind: object, schema: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """The one-field forms: the whole message as a string field, the last number as a numeric
    one, checked against the whole schema."""
    if kind == "string":
        action: dict[str, Any] = {name: text.strip()}
    elif kind in ("integer", "number"):
        numbers = _NUMBER.findall(text)
        if not numbers:
            return None, None
        value = numbers[-1]
        if len(value.replace("-", "").replace(".", "")) > MAX_NUMBER_DIGITS:
            return None, f"its number has over {MAX_NUMBER_DIGITS} digits"
        number: int | float = int(value) if "." not in value else float(value)
        if kind == "integer" and isinstance(number, float):
            if not number.is_integer():
                return None, f"{name} is an integer, and the message's last number is {value}"
            number = int(number)
        action = {name: number}
    else:
        return None, None
    why = _fit(action, schema)
    if why is None:
        return action, None
    return None, f"{action[name]!r} as {name} does not fit the action: {why}"


def parse_action(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The action a message states, as ``(action, None)``, or ``(None, why it is not one)``.

    In order: a JSON object (in a fenced block, else from the first ``{`` to the last ``}``)
    valid against ``schema``; the whole message, for an action with one string field; the last
    number in the message, for an action with one numeric field. Every form is checked against
    the whole ``schema`` (a number against its ``minimum`` and ``maximum``).
    """
    fields = action_fields(schema)
    action, problem = _json_object(text, schema)
    if action is not None:
        return action, None
    if len(fields) == 1 and problem is None:
        ((name, spec),) = fields.items()
        action, problem = _one_field(text, name, spec.get("type"), schema)
        if action is not None:
            return action, None
    shape = {k: v.get("type", "any") for k, v in fields.items()}
    why = problem or "no action found"
    return None, f"not an action ({why}); expected a JSON object with the fields {shape}"


def render_observation(observation: dict[str, Any]) -> str:
    """An observation as context text: its one text field as it is, else its fields as JSON."""
    shown = {k: v for k, v in observation.items() if k not in ("done", "reward", *_RESERVED)}
    if len(shown) == 1 and isinstance(next(iter(shown.values())), str):
        return str(next(iter(shown.values())))
    return json.dumps(shown, sort_keys=True, default=str)
