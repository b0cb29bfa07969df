"""The scripted expert: plays a task's gold actions from the context it is shown.

It is privileged: the runner hands it the episode's problem, whose hidden gold actions it
plays. From the conversation after the opening prompt it counts the
successful tool results (the gold actions done so far) and then, in order:

1. the next gold action: if it identifies the user and the user has not yet given the needed
   facts (email, or name and zip), it asks for them; if it changes the database, it first asks
   for an explicit confirmation and calls the tool only right after the user said yes;
2. once every action is done, it tells the user the required outputs;
3. then it asks whether there is anything else (the scripted user says ``###STOP###``).

With ``make_error`` it calls the next gold action with one plausible wrong argument instead (a
sibling order, the other cancel reason, another variant or payment method of the user, a typo):
a wrong write that succeeds counts as progress and the episode fails; a failed one is retried.
In the outputs phase the error is a wrong number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tasks.tooluse.actions import USER, parse_agent_message
from tasks.tooluse.reward import outputs_found
from tasks.tooluse.tasks_data import Action, ToolTask
from tasks.tooluse.tools import WRITE_TOOL_NAMES
from teamtr_core.toolcalls import ToolCall, render_tool_call

IDENTIFY = {
    "find_user_id_by_email": ("email",),
    "find_user_id_by_name_zip": ("first_name", "last_name", "zip"),
}
_BLOCK = re.compile(r"\n### ([A-Za-z][A-Za-z0-9_]*)\n")
_TOOL_RESULT = re.compile(r"Tool ([A-Za-z_][A-Za-z0-9_.-]*) (returned|failed): ")
_YES = re.compile(r"\b(?:yes|yeah|sure|go ahead|proceed|confirm(?:ed)?|please do)\b", re.IGNORECASE)


@dataclass
class ConversationView:
    """What the expert reads from the context after the opening prompt."""

    progress: int = 0  # successful tool results (plus expected gold failures)
    user_texts: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # team messages to the user
    last_env: str = ""


def read_conversation(
    tail: str, env_speaker: str, opening: str, expected_failures: frozenset[str] = frozenset()
) -> ConversationView:
    """Parses the rendered blocks after the prompt (``\\n### speaker\\ntext``...)."""
    view = ConversationView(user_texts=[opening])
    parts = _BLOCK.split(tail)
    last_call = ""
    for speaker, text in zip(parts[1::2], parts[2::2]):
        text = text.rstrip("\n")
        if speaker != env_speaker:
            action = parse_agent_message(text)
            last_call = ""
            if action.kind == "message":
                view.said.append(action.text)
            elif action.kind == "tool" and action.name is not None:
                last_call = ToolCall(action.name, action.arguments).to_json()
            continue
        view.last_env = text
        result = _TOOL_RESULT.match(text)
        if result and (result.group(2) == "returned" or last_call in expected_failures):
            view.progress += 1
        elif text.startswith(USER):
            view.user_texts.append(text[len(USER) :])
    return view


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """A tool call in the project's canonical form."""
    return render_tool_call(ToolCall(name, dict(arguments)))


def describe(action: Action) -> str:
    """One line naming an action and its arguments, for a confirmation request."""
    args = ", ".join(f"{k} {v!r}" for k, v in action.kwargs.items())
    return f"{action.name.replace('_', ' ')} ({args})"


def expert_reply(
    task: ToolTask,
    view: ConversationView,
    db: Mapping[str, Any],
    rng: np.random.Generator,
    *,
    make_error: bool,
) -> str:
    """The expert's next message (see the module docstring)."""
    actions = task.actions
    if view.progress < len(actions):
        action = actions[view.progress]
        if make_error:
            return call_text(action.name, wrong_arguments(action, db, rng))
        needed = IDENTIFY.get(action.name, ())
        known = " ".join(view.user_texts).lower()
        if any(str(action.kwargs.get(k, "")).lower() not in known for k in needed):
            if action.name == "find_user_id_by_email":
                return "I can help with that. Could you please tell me your email address?"
            return "I can help with that. Could you please tell me your first name, last name and zip code?"
        if action.name in WRITE_TOOL_NAMES and not (
            view.last_env.startswith(USER) and _YES.search(view.last_env)
        ):
            return f"I am going to {describe(action)}. Do you confirm (yes/no)?"
        return call_text(action.name, action.kwargs)
    found = outputs_found(task.outputs, view.said)
    if not all(found.values()):
        outputs = [_wrong_output(o) for o in task.outputs] if make_error else list(task.outputs)
        return "Here is the information you asked for: " + ", ".join(outputs) + "."
    return "Your request has been handled. Is there anything else I can help you with?"


def _wrong_output(output: str) -> str:
    match = re.search(r"\d", output)
    if match is None:
        return "unknown"
    digit = str((int(match.group(0)) + 1) % 10)
    return output[: match.start()] + digit + output[match.end() :]


# -- plausible wrong arguments -------------------------------------------------------------------
def wrong_arguments(
    action: Action, db: Mapping[str, Any], rng: np.random.Generator
) -> dict[str, Any]:
    """The action's arguments with one of them replaced by a plausible wrong value."""
    kwargs = {k: v for k, v in action.kwargs.items()}
    options = [k for k in kwargs if k not in ("summary", "thought")]
    if not options:
        return kwargs
    key = options[int(rng.integers(len(options)))]
    kwargs[key] = _wrong_value(key, kwargs, db, rng)
    return kwargs


def _wrong_value(
    key: str, kwargs: Mapping[str, Any], db: Mapping[str, Any], rng: np.random.Generator
) -> Any:
    value = kwargs[key]
    order = db.get("orders", {}).get(kwargs.get("order_id", ""), {})
    user = db.get("users", {}).get(order.get("user_id", kwargs.get("user_id", "")), {})
    alternatives: Sequence[Any] = ()
    if key == "order_id":
        alternatives = [o for o in user.get("orders", ()) if o != value]
    elif key == "reason":
        alternatives = [r for r in ("no longer needed", "ordered by mistake") if r != value]
    elif key == "payment_method_id":
        alternatives = [p for p in user.get("payment_methods", {}) if p != value]
    elif key == "item_ids" and isinstance(value, list) and len(value) > 1:
        return value[:-1]
    elif key == "item_ids" and isinstance(value, list):
        alternatives = [[i["item_id"]] for i in order.get("items", ()) if [i["item_id"]] != value]
    elif key == "new_item_ids" and isinstance(value, list) and value:
        return [_other_variant(item_id, db, rng) for item_id in value]
    if alternatives:
        return alternatives[int(rng.integers(len(alternatives)))]
    return _typo(value)


def _other_variant(item_id: str, db: Mapping[str, Any], rng: np.random.Generator) -> str:
    for product in db.get("products", {}).values():
        variants = product.get("variants", {})
        if item_id in variants:
            others = [v for v, d in variants.items() if v != item_id and d.get("available")]
            if others:
                return str(others[int(rng.integers(len(others)))])
    return str(_typo(item_id))


def _typo(value: Any) -> Any:
    if isinstance(value, list):
        return [_typo(v) for v in value[:1]] + list(value[1:])
    text = str(value)
    for i in range(len(text) - 1, -1, -1):
        if text[i].isdigit():
            return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]
    return text + "x" if isinstance(value, str) else value
