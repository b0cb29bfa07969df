"""How team messages become actions, the reward's output matching, and the user simulators."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from adapters.scripted import ConstantPolicy
from tasks.tooluse.actions import MAX_SCAN_CHARS, parse_agent_message, render_feedback
from tasks.tooluse.db import load_db
from tasks.tooluse.reward import outputs_found
from tasks.tooluse.tasks_data import ToolTask, builtin_tasks
from tasks.tooluse.user_sim import STOP, PolicyUser, ScriptedUser, Turn, first_person
from teamtr_core.policy import Generation, SamplingParams

TASKS = {t.id: t for t in builtin_tasks()}
CANCEL = TASKS["tooluse:builtin-000"]  # Ada Park, email, cancel #W5001001
NAME_ZIP = TASKS["tooluse:builtin-001"]  # Chloe Martin, name + zip


# -- message -> action ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"arguments":{"order_id":"#W1"},"name":"get_order_details"}</tool_call>',
        'Let me check.\n<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n</tool_call>',
        '{"type": "function", "function": {"name": "get_order_details", "arguments": "{\\"order_id\\": \\"#W1\\"}"}}',
        '<|python_tag|>{"name": "get_order_details", "parameters": {"order_id": "#W1"}}',
        '```json\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n```',
    ],
)
def test_tool_calls_in_any_supported_format(text: str) -> None:
    action = parse_agent_message(text)
    assert action.kind == "tool"
    assert action.name == "get_order_details" and action.arguments == {"order_id": "#W1"}


def test_only_the_first_call_runs() -> None:
    text = '[TOOL_CALLS] [{"name": "think", "arguments": {"thought": "a"}}, {"name": "calculate", "arguments": {"expression": "1"}}]'
    action = parse_agent_message(text)
    assert action.name == "think" and action.ignored_calls == 1


def test_plain_text_and_respond_go_to_the_user() -> None:
    assert parse_agent_message("  Your order is cancelled.  ").text == "Your order is cancelled."
    respond = parse_agent_message(
        '<tool_call>{"name": "respond", "arguments": {"content": "Hello!"}}</tool_call>'
    )
    assert (respond.kind, respond.text) == ("message", "Hello!")


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_order_details", "arguments": {"order_id": </tool_call>',
        '<tool_call>{"arguments": {"order_id": "#W1"}}</tool_call>',
        "<tool_call>get_order_details #W1</tool_call>",
        '<tool_call>{"name": "respond", "arguments": {"content": 5}}</tool_call>',
        '<tool_call>{"name": "respond", "arguments": {"content": "hi", "to": "boss"}}</tool_call>',
    ],
)
def test_malformed_calls_are_invalid(text: str) -> None:
    action = parse_agent_message(text)
    assert action.kind == "invalid" and action.text.startswith("Error")


def test_a_call_past_the_scan_window_is_too_long_not_unbalanced() -> None:
    """Issue #15: a call cut by the scan window was reported as 'unbalanced JSON'."""
    call = '<tool_call>{"name": "think", "arguments": {"thought": "%s"}}</tool_call>'
    cut = parse_agent_message("Thinking. " + call % ("x" * MAX_SCAN_CHARS))
    assert cut.kind == "invalid"
    assert cut.text.startswith("Error: tool call too long: it runs past the first 65536 characters")
    assert "unbalanced" not in cut.text
    short = parse_agent_message(call % ("x" * 1000), max_scan_chars=500)
    assert short.kind == "invalid" and "past the first 500 characters" in short.text
    assert parse_agent_message(call % ("x" * 1000)).kind == "tool"  # inside the window: runs
    never_closed = parse_agent_message(call.replace("}}", "") % "x")  # short and broken
    assert never_closed.kind == "invalid" and "unbalanced JSON" in never_closed.text


def test_feedback_formats() -> None:
    assert render_feedback("ok", "{}", "get_order_details") == "Tool get_order_details returned: {}"
    assert render_feedback("failed", "Error: x", "f") == "Tool f failed: Error: x"
    assert render_feedback("invalid", "Error: y") == "Invalid tool call: Error: y"
    assert render_feedback("user", "hi") == "User: hi"


# -- outputs --------------------------------------------------------------------------------------
def test_outputs_match_like_tau_bench() -> None:
    said = ["Your balance is now $1,093.34.", "The answer is TWELVE."]
    assert outputs_found(["1093.34", "twelve", "12"], said) == {
        "1093.34": True,  # commas removed from the message
        "twelve": True,  # case-insensitive
        "12": False,
    }
    assert outputs_found([], said) == {}
    assert outputs_found(["5"], []) == {"5": False}


# -- the scripted user ----------------------------------------------------------------------------
def _reply(user: ScriptedUser, task: ToolTask, message: str) -> str:
    return user.reply(task, [Turn("agent", message)], np.random.default_rng(0))


def test_first_person() -> None:
    assert (
        first_person("You want your order. If the agent asks you, you say yes. Yours too.")
        == "I want my order. If the agent asks me, I say yes. Mine too."
    )


def test_opening_hides_the_identity_sentence() -> None:
    user = ScriptedUser(load_db()["users"])
    opening = user.opening(CANCEL)
    assert opening.startswith("Hi! I want to cancel my pending order #W5001001")
    assert "ada.park@example.com" not in opening
    single = ToolTask("t", "ada_park_1001", "You are in a hurry.", (), ())
    assert user.opening(single) == "Hi! I am in a hurry."


def test_scripted_user_answers_from_the_record() -> None:
    user = ScriptedUser(load_db()["users"])
    assert _reply(user, CANCEL, "Could you give me your email address?") == (
        "My email is ada.park@example.com."
    )
    assert _reply(user, NAME_ZIP, "Please provide your first name, last name and zip code.") == (
        "My name is Chloe Martin and my zip code is 78701."
    )
    assert _reply(user, CANCEL, "What is your user id?") == "My user id is ada_park_1001."
    unknown = ToolTask("t", "nobody", "You want help.", (), ())
    assert _reply(user, unknown, "What is your email?") == "Sorry, I would rather not share that."


def test_scripted_user_confirms_restates_and_stops() -> None:
    user = ScriptedUser(load_db()["users"])
    confirm = _reply(user, CANCEL, "I will cancel #W5001001 (zip 94110). Do you confirm (yes/no)?")
    assert confirm == "Yes, please go ahead."  # a confirmation wins over a mentioned zip
    assert _reply(user, CANCEL, "Which order?").startswith("Here is what I need: I am Ada Park")
    assert _reply(user, CANCEL, "Done. Your order is cancelled.") == "Okay, thank you."
    bye = _reply(user, CANCEL, "Is there anything else I can help you with?")
    assert bye.endswith(STOP)
    assert STOP not in _reply(user, CANCEL, "Let me look that up.")


# -- a user played by a policy --------------------------------------------------------------------
class Recorder:
    """Records prompts and seeds; answers with a fixed text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.prompts: list[str] = []
        self.seeds: list[int | None] = []

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.prompts += list(prompts)
        self.seeds.append(sampling.seed)
        return [Generation(self.text) for _ in prompts]


def test_policy_user_prompt_opening_cache_and_stop() -> None:
    policy = Recorder("  I need to cancel an order. ###STOP###  ")
    user = PolicyUser(policy, SamplingParams(temperature=0.0, max_new_tokens=32))
    opening = user.opening(CANCEL)
    assert opening == "I need to cancel an order."  # STOP never opens a conversation
    assert user.opening(CANCEL) == opening and len(policy.prompts) == 1  # cached
    prompt = policy.prompts[0]
    assert CANCEL.instruction in prompt and prompt.endswith("### user\n")
    conversation = [Turn("user", opening), Turn("agent", "Sure, your email?")]
    reply = user.reply(CANCEL, conversation, np.random.default_rng(0))
    assert reply.endswith(STOP)
    assert "### agent\nSure, your email?" in policy.prompts[-1]
    assert policy.seeds[-1] is not None


def test_policy_user_works_with_constant_policy_and_rejects_non_policies() -> None:
    user = PolicyUser(ConstantPolicy("hello"))
    assert user.reply(CANCEL, [Turn("agent", "hi")], np.random.default_rng(0)) == "hello"
    with pytest.raises(TypeError, match="generate"):
        PolicyUser(object())  # type: ignore[arg-type]
