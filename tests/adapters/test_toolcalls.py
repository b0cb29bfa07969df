"""Tests for the tool-call normaliser in ``teamtr_core.toolcalls``."""

from __future__ import annotations

import copy
import json
import pickle
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teamtr_core.toolcalls import (
    CANONICAL_CLOSE,
    CANONICAL_OPEN,
    NAME_RE,
    ToolCall,
    ToolCallParse,
    canonicalize_tool_calls,
    parse_tool_calls,
    parse_tool_calls_detailed,
    render_tool_call,
)

ARGS = {"order_id": "#W1", "qty": 2}
CANCEL = ToolCall("cancel_order", ARGS)
CANONICAL = '<tool_call>{"arguments":{"order_id":"#W1","qty":2},"name":"cancel_order"}</tool_call>'
ARGS_JSON = json.dumps(ARGS)  # arguments given as a JSON-encoded string
OPENAI_ITEM = {
    "id": "call_9x",
    "type": "function",
    "function": {"name": "cancel_order", "arguments": ARGS_JSON},
}

FORMATS = {
    "hermes_qwen": '<tool_call>\n{"name": "cancel_order", "arguments": {"order_id": "#W1", "qty": 2}}\n</tool_call>',
    "hermes_arguments_string": f"<tool_call>{json.dumps({'name': 'cancel_order', 'arguments': ARGS_JSON})}</tool_call>",
    "llama_bare": '{"name": "cancel_order", "parameters": {"order_id": "#W1", "qty": 2}}',
    "llama_python_tag": '<|python_tag|>{"name": "cancel_order", "parameters": {"order_id": "#W1", "qty": 2}}',
    "openai_function": json.dumps(OPENAI_ITEM),
    "openai_tool_calls": json.dumps(
        {"role": "assistant", "content": None, "tool_calls": [OPENAI_ITEM]}
    ),
    "openai_function_call": json.dumps(
        {"function_call": {"name": "cancel_order", "arguments": ARGS_JSON}}
    ),
    "mistral": '[TOOL_CALLS] [{"name": "cancel_order", "arguments": {"order_id": "#W1", "qty": 2}}]',
    "fenced_json": '```json\n{"name": "cancel_order", "arguments": {"order_id": "#W1", "qty": 2}}\n```',
    "fenced_tool_call": '```tool_call\n{"name": "cancel_order", "arguments": "{\\"order_id\\": \\"#W1\\", \\"qty\\": 2}"}\n```',
    "fenced_openai": f"```\n{json.dumps(OPENAI_ITEM, indent=2)}\n```",
    "json_list": '[{"name": "cancel_order", "arguments": {"qty": 2, "order_id": "#W1"}}]',
}


@pytest.mark.parametrize("text", FORMATS.values(), ids=FORMATS.keys())
def test_every_format_parses_to_the_same_call_and_canonicalises(text: str) -> None:
    assert parse_tool_calls(text) == [CANCEL]
    assert parse_tool_calls_detailed(text) == ToolCallParse([CANCEL], [])
    prose = f"I'll cancel that order now.\n{text}\nAnything else?"
    assert canonicalize_tool_calls(prose) == (
        f"I'll cancel that order now.\n{CANONICAL}\nAnything else?",
        1,
    )


def test_canonical_output_literal() -> None:
    text = 'Sure.\n<tool_call>\n{"name": "cancel_order", "arguments": {"qty": 2, "order_id": "#W1"}}\n</tool_call>\nDone.'
    expected = 'Sure.\n<tool_call>{"arguments":{"order_id":"#W1","qty":2},"name":"cancel_order"}</tool_call>\nDone.'
    assert canonicalize_tool_calls(text) == (expected, 1)
    assert (
        render_tool_call(CANCEL) == CANONICAL == CANONICAL_OPEN + CANCEL.to_json() + CANONICAL_CLOSE
    )


def test_several_calls_in_order_with_prose_kept() -> None:
    text = (
        'First I look the user up: {"name": "find_user", "parameters": {"email": "a@b.c"}}. '
        'Then <tool_call>{"name": "get_order", "arguments": {"id": 7}}</tool_call> and finally '
        '[TOOL_CALLS] [{"name": "cancel_order", "arguments": {"order_id": "#W1", "qty": 2}}, '
        '{"name": "notify", "arguments": "{}"}] -- done.'
    )
    expected = [
        ToolCall("find_user", {"email": "a@b.c"}),
        ToolCall("get_order", {"id": 7}),
        CANCEL,
        ToolCall("notify", {}),
    ]
    assert parse_tool_calls(text) == expected
    out, count = canonicalize_tool_calls(text)
    assert count == 4
    assert out == (
        f"First I look the user up: {render_tool_call(expected[0])}. "
        f"Then {render_tool_call(expected[1])} and finally "
        f"{render_tool_call(expected[2])}\n{render_tool_call(expected[3])} -- done."
    )
    assert parse_tool_calls(out) == expected
    assert canonicalize_tool_calls(out) == (out, 4)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Plain prose: the order #W1 was cancelled.",
        'Code: function f() { return {}; } and a dict {"name": "Alice", "age": 3}.',
        'A result object {"result": {"name": "f", "arguments": {}}} is data, not a call.',
        '```json\n[1, 2, {"a": [3]}]\n```',
        "Unbalanced { braces [ and \" quotes ' everywhere }}}",
    ],
)
def test_text_without_calls_is_returned_identically(text: str) -> None:
    assert parse_tool_calls_detailed(text) == ToolCallParse([], [])
    out, count = canonicalize_tool_calls(text)
    assert out is text and count == 0


def test_explicit_marker_allows_a_call_without_arguments() -> None:
    assert parse_tool_calls('<tool_call>{"name": "list_orders"}</tool_call>') == [
        ToolCall("list_orders")
    ]
    assert parse_tool_calls('{"name": "list_orders"}') == []  # bare: needs arguments/parameters


# ---------------------------------------------------------------- malformed candidates


@pytest.mark.parametrize(
    ("text", "diagnostic"),
    [
        ('<tool_call>{"name": "f", "arguments": {"a": 1,}}</tool_call>', "invalid JSON"),
        ('<tool_call>{"name": "f", "arguments": {"a": 1}</tool_call>', "unbalanced JSON"),
        ('{"name": "f", "arguments": {"x": NaN}}', "invalid JSON"),
        ('<tool_call>{"arguments": {"a": 1}}</tool_call>', "name is missing"),
        ('{"name": 3, "arguments": {}}', "name is missing"),
        ('{"name": "rm -rf /", "arguments": {}}', "invalid name 'rm -rf /'"),
        ('{"name": "f", "arguments": [1, 2]}', "arguments is not an object"),
        ('{"name": "f", "arguments": "not json"}', "arguments string is not valid JSON"),
        ('{"name": "f", "arguments": "[1, 2]"}', "arguments is not an object"),
        ('{"type": "function", "function": {"name": "", "arguments": "{}"}}', "name is missing"),
    ],
)
def test_malformed_call_gives_no_call_and_a_diagnostic(text: str, diagnostic: str) -> None:
    calls, errors = parse_tool_calls_detailed(f"Let me try: {text}")
    assert calls == []
    assert errors and errors[0].startswith("tool_call 1: ") and diagnostic in errors[0]
    out, count = canonicalize_tool_calls(text)
    assert out is text and count == 0


def test_mixed_list_keeps_valid_calls_but_is_left_verbatim() -> None:
    text = '[TOOL_CALLS] [{"name": "ok", "arguments": {}}, {"name": "bad name", "arguments": {}}]'
    assert parse_tool_calls_detailed(text) == ToolCallParse(
        [ToolCall("ok")], ["tool_call 2: invalid name 'bad name'"]
    )
    assert canonicalize_tool_calls(text) == (text, 0)


def test_braces_and_quotes_inside_strings() -> None:
    text = '{"name":"say","arguments":{"text":"a } b { c"}} then {"name":"say","arguments":{"text":"q\\"}\\" ]"}}'
    assert parse_tool_calls(text) == [
        ToolCall("say", {"text": "a } b { c"}),
        ToolCall("say", {"text": 'q"}" ]'}),
    ]


def test_unicode_arguments_preserved() -> None:
    args = {"city": "Zürich", "note": "日本語 🚀", "escaped": "\u00e9"}
    text = '<tool_call>{"name": "book", "arguments": {"city": "Zürich", "note": "日本語 🚀", "escaped": "\\u00e9"}}</tool_call>'
    (call,) = parse_tool_calls(text)
    assert call.arguments_dict() == args
    out, _ = canonicalize_tool_calls(text)
    assert '"city":"Zürich"' in out and "日本語 🚀" in out and '"escaped":"é"' in out


def test_call_after_max_chars_is_not_scanned() -> None:
    text = "x" * 200 + FORMATS["hermes_qwen"]
    calls, errors = parse_tool_calls_detailed(text, max_chars=150)
    assert calls == [] and errors == ["text truncated to max_chars=150"]
    assert canonicalize_tool_calls(text, max_chars=150) == (text, 0)
    assert parse_tool_calls(text, max_chars=1000) == [CANCEL]


def test_call_cut_by_max_chars_is_too_long_not_unbalanced() -> None:
    """Issue #15: a call still open where the scan window ends said 'unbalanced JSON'."""
    long_call = '<tool_call>{"name": "f", "arguments": {"a": "' + "x" * 300 + '"}}</tool_call>'
    calls, errors = parse_tool_calls_detailed("Calling. " + long_call, max_chars=150)
    assert calls == []
    assert errors == [
        "text truncated to max_chars=150",
        "tool_call 1: too long: runs past the 150-character scan window (max_chars)",
    ]
    assert parse_tool_calls(long_call, max_chars=1000) == [ToolCall("f", {"a": "x" * 300})]
    # Open at the end of a text that was not cut, or broken inside the window: unbalanced.
    assert parse_tool_calls_detailed(long_call[:100]).errors == ["tool_call 1: unbalanced JSON"]
    broken = '<tool_call>{"name": "f", "arguments": {"a": 1]}' + " " * 300
    assert parse_tool_calls_detailed(broken, max_chars=150).errors[1:] == [
        "tool_call 1: unbalanced JSON"
    ]
    # An inner object met again after the outer one (memoised): still too long.
    nested = '{"name": "f", "arguments": {"g": {"name": "h", "arguments": {"s": "' + "y" * 300
    errors = parse_tool_calls_detailed(nested, max_chars=150).errors[1:]
    assert errors and all(": too long: runs past the 150-character" in e for e in errors)


# ---------------------------------------------------------------- adversarial input

DEEP_ARGS = '{"name": "f", "arguments": "' + "[" * 10_000 + "]" * 10_000 + '"}'
ADVERSARIAL = {
    "1MB_open_braces": "{" * 1_000_000,
    "1MB_quotes": '"' * 1_000_000,
    "1MB_backslashes_in_string": '{"a": "' + "\\" * 1_000_000,
    "nested_lists_10k": "[" * 10_000 + "]" * 10_000,
    "nested_objects_10k": '{"name": "f", "arguments": ' + '{"a": ' * 10_000 + "1" + "}" * 10_001,
    "nested_list_in_arguments_string": DEEP_ARGS,
    "alternating_brace_quote": '{"' * 500_000,
    "unclosed_objects": '{"a":[' * 200_000,
    "many_empty_objects": "{}" * 500_000,
    "many_markers": "<tool_call>" * 100_000,
    "many_valid_calls": '{"name":"f","arguments":{}}' * 40_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_input_is_bounded_and_never_raises(text: str) -> None:
    started = time.perf_counter()
    result = parse_tool_calls_detailed(text)
    out, count = canonicalize_tool_calls(text)
    assert time.perf_counter() - started < 2.0  # hang guard, not a benchmark
    assert isinstance(result.calls, list) and isinstance(out, str)
    assert len(result.calls) == count or count == 0
    assert not any("budget" in error for error in result.errors)  # linear scan, no cut-off


@pytest.mark.parametrize("junk", ['{"\\"', '{"a":[', '{"', "[{", '"{'])
def test_call_after_long_junk_is_still_found(junk: str) -> None:
    text = junk * (30_000 // len(junk)) + " " + FORMATS["hermes_qwen"]
    started = time.perf_counter()
    assert parse_tool_calls_detailed(text).calls == [CANCEL]
    assert time.perf_counter() - started < 2.0


def test_deep_nesting_is_a_diagnostic_not_a_recursion_error() -> None:
    assert parse_tool_calls_detailed(DEEP_ARGS) == ToolCallParse(
        [], ["tool_call 1: arguments string is not valid JSON"]
    )
    calls, errors = parse_tool_calls_detailed(ADVERSARIAL["nested_objects_10k"])
    assert calls == [] and errors == ["tool_call 1: JSON nested too deeply"]


# ---------------------------------------------------------------- properties

NAMES = st.from_regex(NAME_RE, fullmatch=True)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
CALLS = st.builds(ToolCall, NAMES, st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4))
SAFE_PROSE = st.text(st.characters(exclude_characters='{}[]"<>`|'), max_size=30)
NOISE_TOKENS = [*'{}[]":,\\ \n', "```", "```json\n", "name", '"name":', '"arguments":', '"{}"']
NOISE_TOKENS += [CANONICAL_OPEN, CANONICAL_CLOSE, "[TOOL_CALLS]", "<|python_tag|>", "é", "🚀"]
NOISE_TOKENS += ['{"name":"f","arguments":{}}', '{"name":"g"}', '"tool_calls":', '"function":']
NOISE = st.lists(st.sampled_from(NOISE_TOKENS) | st.text(max_size=3), max_size=30).map("".join)


def _format(call: ToolCall, style: int) -> str:
    args: dict[str, Any] = call.arguments_dict()
    plain = {"name": call.name, "arguments": args}
    return [
        render_tool_call(call),
        f"<tool_call>\n{json.dumps(plain, indent=1)}\n</tool_call>",
        json.dumps({"name": call.name, "parameters": args}),
        json.dumps(
            {"type": "function", "function": {"name": call.name, "arguments": json.dumps(args)}}
        ),
        f"[TOOL_CALLS] [{json.dumps(plain)}]",
        f"```json\n{json.dumps(plain)}\n```",
    ][style]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(SAFE_PROSE, CALLS, st.integers(0, 5)), max_size=4), SAFE_PROSE)
def test_canonicalize_round_trip_and_idempotence(
    parts: list[tuple[str, ToolCall, int]], tail: str
) -> None:
    text = "".join(prose + _format(call, style) for prose, call, style in parts) + tail
    calls = [call for _, call, _ in parts]
    assert parse_tool_calls(text) == calls
    once, count = canonicalize_tool_calls(text)
    assert count == len(calls)
    assert once == "".join(prose + render_tool_call(call) for prose, call, _ in parts) + tail
    assert canonicalize_tool_calls(once) == (once, count)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(max_size=200), NOISE))
def test_random_text_never_raises_and_canonicalize_is_idempotent(text: str) -> None:
    calls, errors = parse_tool_calls_detailed(text)
    assert all(isinstance(call, ToolCall) for call in calls) and all(
        isinstance(e, str) for e in errors
    )
    once, count = canonicalize_tool_calls(text)
    assert canonicalize_tool_calls(once)[0] == once
    assert parse_tool_calls(once) == calls  # rewriting never loses or invents a call
    if count == 0:
        assert once is text


# ---------------------------------------------------------------- ToolCall value


def test_to_json_round_trips_and_is_canonical() -> None:
    call = ToolCall("search.v2", {"b": [1, {"z": None, "a": 1.5}], "a": "ü"})
    assert call.to_json() == '{"arguments":{"a":"ü","b":[1,{"a":1.5,"z":null}]},"name":"search.v2"}'
    assert json.loads(call.to_json()) == {
        "name": "search.v2",
        "arguments": {"a": "ü", "b": [1, {"a": 1.5, "z": None}]},
    }
    assert ToolCall("f", {"a": 1, "b": 2}) == ToolCall("f", {"b": 2, "a": 1})
    assert len({ToolCall("f", {"a": 1}), ToolCall("f", {"a": 1}), ToolCall("f", {"a": 2})}) == 2


def test_arguments_are_copied_and_read_only() -> None:
    args: dict[str, Any] = {"items": [1, 2], "meta": {"k": "v"}}
    call = ToolCall("f", args)
    args["items"].append(3)
    args["meta"]["k"] = "changed"
    args["new"] = True
    assert call.arguments_dict() == {"items": [1, 2], "meta": {"k": "v"}}
    with pytest.raises(TypeError):
        call.arguments["new"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        call.arguments["meta"]["k"] = 1
    assert call.arguments["items"] == (1, 2)
    copy = call.arguments_dict()
    copy["items"].append(9)
    assert call.arguments_dict()["items"] == [1, 2]


def test_tool_call_pickles_and_deep_copies() -> None:
    call = ToolCall("f", {"a": [1, {"b": None}]})
    assert pickle.loads(pickle.dumps(call)) == call == copy.deepcopy(call)


def test_parsed_arguments_are_independent_of_later_mutation() -> None:
    (call,) = parse_tool_calls(FORMATS["hermes_qwen"])
    mutable = call.arguments_dict()
    mutable["qty"] = 99
    assert call == CANCEL and call.arguments["qty"] == 2


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("rm -rf /", {}, ValueError),
        ("", {}, ValueError),
        ("x" * 65, {}, ValueError),
        ("f\n", {}, ValueError),
        ("f", {"x": float("nan")}, ValueError),
        ("f", {"x": object()}, TypeError),
        ("f", {1: "x"}, TypeError),
        ("f", [("a", 1)], TypeError),
    ],
)
def test_tool_call_rejects_invalid_values(
    name: str, arguments: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        ToolCall(name, arguments)
