"""TeamProtocol: validation (all problems at once), message cleaning and context rendering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks import Message
from teamtr_env import ConfigError, TeamProtocol
from teamtr_env.spaces import UnicodeText


def test_defaults() -> None:
    p = TeamProtocol()
    assert p.agents == ("solver", "critic", "aggregator")
    assert p.final_agent == "aggregator" and p.max_turns == 3
    assert p.system_prompt("critic").startswith("You are the critic")


def test_custom_team_defaults_follow_agents() -> None:
    p = TeamProtocol(agents=["planner", "checker"], system_prompts={"checker": ""})
    assert p.final_agent == "checker" and p.max_turns == 2
    assert p.system_prompt("checker") == ""  # explicitly empty
    assert "planner" in p.system_prompt("planner")


def test_every_problem_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        TeamProtocol(
            agents=("a", "a", "9bad"),
            system_prompts={"zed": "x"},
            final_agent="nobody",
            max_turns=0,
            max_message_chars=-1,
            max_context_chars=10,
            reasoning="hide",  # type: ignore[arg-type]
        )
    text = str(err.value)
    expected = [
        "'9bad' is not a valid name",
        "names must be unique, repeated: ['a']",
        "system_prompts: keys ['zed'] are not agents",
        "final_agent: 'nobody' is not one of the agents",
        "max_turns: expected a positive integer, got 0",
        "max_message_chars: expected a positive integer, got -1",
        "max_context_chars: expected an integer >= 256, got 10",
        "reasoning: expected 'keep' or 'strip', got 'hide'",
    ]
    for fragment in expected:
        assert fragment in text
    assert len(err.value.errors) == len(expected)


def test_empty_team_rejected() -> None:
    with pytest.raises(ConfigError, match="at least one agent"):
        TeamProtocol(agents=())


@pytest.mark.parametrize(
    ("action", "text", "notes"),
    [
        ("plain", "plain", ()),
        (None, "", ("none_action",)),
        (b"caf\xc3\xa9 \xff", "café \ufffd", ("decoded_bytes",)),
        (3.5, "3.5", ("non_string_action",)),
        ("a\x00b\x07c\nd\te", "abc\nd\te", ("control_chars_removed",)),
        ("x\ud800y", "xy", ("control_chars_removed",)),
        ("z" * 20, "z" * 10, ("truncated",)),
    ],
)
def test_clean(action: object, text: str, notes: tuple) -> None:
    cleaned = TeamProtocol(max_message_chars=10).clean(action)
    assert (cleaned.text, cleaned.notes) == (text, notes)


def test_strip_reasoning_including_unterminated() -> None:
    p = TeamProtocol(reasoning="strip")
    assert p.clean("<think>a\nb</think> Answer: 1").text == "Answer: 1"
    assert p.clean("Answer: 2 <THINK>never closed").text == "Answer: 2"
    assert TeamProtocol().clean("<think>x</think>y").text == "<think>x</think>y"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_cleaned_text_is_always_in_the_observation_space(action: str) -> None:
    cleaned = TeamProtocol(max_message_chars=100).clean(action)
    assert UnicodeText(100, min_length=0).contains(cleaned.text)


def test_render_layout_and_cue() -> None:
    p = TeamProtocol(agents=("a", "b"), system_prompts={"a": "SYS-A", "b": ""})
    transcript = [Message("agent", "a", "hi"), Message("env", "task", "feedback")]
    text, truncated = p.render("Q?", transcript, "b")
    assert text == "### Problem\nQ?\n### a\nhi\n### task\nfeedback\n### b\n"
    assert not truncated
    assert p.render("Q?", [], "a")[0] == "SYS-A\n### Problem\nQ?\n### a\n"


def test_render_cuts_from_the_left_when_the_prompt_alone_is_too_long() -> None:
    p = TeamProtocol(max_context_chars=300)
    text, truncated = p.render("P" * 1000, [Message("agent", "solver", "m")], "critic")
    assert truncated and len(text) == 300 and text.endswith("### critic\n")


def test_tool_calls_canonical_mode() -> None:
    qwen = 'Let me check. <tool_call>{"name": "get_order", "arguments": {"order_id": "#W1"}}</tool_call>'
    llama = 'Let me check. {"name": "get_order", "parameters": {"order_id": "#W1"}}'
    canonical = TeamProtocol(tool_calls="canonical")
    expected = (
        'Let me check. <tool_call>{"arguments":{"order_id":"#W1"},"name":"get_order"}</tool_call>'
    )
    for text in (qwen, llama):
        cleaned = canonical.clean(text)
        assert cleaned.text == expected
        assert "tool_calls_canonicalized" in cleaned.notes
    assert TeamProtocol().clean(llama).text == llama  # default: keep what the model wrote
    assert canonical.clean("no calls here").notes == ()
    with pytest.raises(ConfigError, match="tool_calls: expected 'keep' or 'canonical'"):
        TeamProtocol(tool_calls="json")  # type: ignore[arg-type]


def test_previous_visibility_shows_only_the_message_before_the_turn() -> None:
    relay = TeamProtocol(agents=("a", "b", "c"), visibility="previous", full_view=("c",))
    assert relay.shows_prompt("a", 0) and not relay.shows_prompt("b", 1)
    assert relay.shows_prompt("c", 2)  # full_view agents see everything, the problem included
    assert relay.sees("b", 1, "a", 0) and not relay.sees("b", 2, "a", 0)
    assert not relay.sees("a", 3, "a", 0)  # not even its own earlier message
    assert relay.sees("c", 2, "a", 0)
    text, _ = relay.render(None, [], "b")
    assert "Problem" not in text
    with pytest.raises(ConfigError, match="'previous'"):
        TeamProtocol(visibility="nearest")  # type: ignore[arg-type]
