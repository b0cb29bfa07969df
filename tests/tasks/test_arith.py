"""Tests for the ``teamtr/Arith-v0`` task: rules (generation, evaluation, parsing, answer
extraction) and the ``ArithTask`` plugin (sampling, grading, scoring, scripted expert)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks import Episode, Message, Problem, Score, SupportsExpert, TaskConfigError
from tasks.arith import rules
from tasks.arith.task import ArithTask

HOWS = {"answer_tag", "boxed", "last_integer", "none"}


def reference_eval(numbers: Sequence[int], ops: Sequence[str]) -> int:
    """An independent two-pass evaluator: collapse every ``*`` first, then fold ``+``/``-``."""
    values, pending = [numbers[0]], []
    for op, number in zip(ops, numbers[1:], strict=True):
        if op == "*":
            values[-1] = values[-1] * number
        else:
            pending.append(op)
            values.append(number)
    total = values[0]
    for op, value in zip(pending, values[1:], strict=True):
        total = total + value if op == "+" else total - value
    return total


operator_sets = st.sets(st.sampled_from("+-*"), min_size=1).map(lambda s: "".join(sorted(s)))


# ---------------------------------------------------------------- evaluate


@pytest.mark.parametrize(
    ("numbers", "ops", "expected"),
    [
        ([2, 3, 4], ["+", "*"], 14),
        ([10, 2, 3, 1], ["-", "*", "+"], 5),
        ([2, 3, 4, 1], ["*", "*", "-"], 23),
        ([2, 3, 4, 5], ["*", "+", "*"], 26),
        ([5, 3, 2], ["-", "-"], 0),  # left to right, not 5 - (3 - 2)
        ([1, 2, 3], ["-", "*"], -5),
        ([0, 7], ["*"], 0),
        ([7], [], 7),
    ],
)
def test_evaluate_precedence(numbers: list[int], ops: list[str], expected: int) -> None:
    assert rules.evaluate(numbers, ops) == expected


@pytest.mark.parametrize(("numbers", "ops"), [([1, 2], []), ([1, 2], ["+", "+"]), ([1], ["+"])])
def test_evaluate_operator_count_mismatch_raises(numbers: list[int], ops: list[str]) -> None:
    with pytest.raises(ValueError, match="operators"):
        rules.evaluate(numbers, ops)


@pytest.mark.parametrize("op", ["/", "**", "%", "", "+-"])
def test_evaluate_unknown_operator_raises(op: str) -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        rules.evaluate([6, 3], [op])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 10**9), min_size=1, max_size=8).flatmap(
        lambda nums: st.tuples(
            st.just(nums),
            st.lists(st.sampled_from("+-*"), min_size=len(nums) - 1, max_size=len(nums) - 1),
        )
    )
)
def test_evaluate_matches_reference(case: tuple[list[int], list[str]]) -> None:
    numbers, ops = case
    assert rules.evaluate(numbers, ops) == reference_eval(numbers, ops)


# ---------------------------------------------------------------- render / parse_expression


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    digits=st.integers(1, 9),
    operands=st.integers(2, 6),
    operators=operator_sets,
)
def test_parse_expression_round_trips_render(
    seed: int, digits: int, operands: int, operators: str
) -> None:
    numbers, ops = rules.generate(np.random.default_rng(seed), digits, operators, operands)
    assert len(numbers) == operands and len(ops) == operands - 1
    text = rules.render(numbers, ops)
    assert rules.parse_expression(text) == (numbers, ops)
    # Spacing is not significant.
    assert rules.parse_expression(text.replace(" ", "")) == (numbers, ops)
    assert rules.parse_expression("  " + text.replace(" ", "   ") + "\n") == (numbers, ops)


def test_render_format() -> None:
    assert rules.render([12, 3, 40], ["+", "*"]) == "12 + 3 * 40"
    assert rules.render([5], []) == "5"


@pytest.mark.parametrize(
    "text",
    [
        "2 + ",
        "import os",
        "2 ** 3",
        "",
        "   ",
        "1+2)",
        "(1+2",
        "+ 2",
        "2 3",
        "2 / 3",
        "-3 + 1",
        "2 + x",
        "__import__('os').system('true')",
        "2 + 3; 4",
        "1\x00+2",
    ],
)
def test_parse_expression_rejects(text: str) -> None:
    assert rules.parse_expression(text) is None


def test_parse_expression_huge_operand_does_not_raise() -> None:
    # BUG (tasks/arith/rules.py, parse_expression, ``int(n) for n in numbers``): on Python >= 3.11
    # int() refuses strings of more than 4300 digits and raises ValueError, although the function
    # documents "None if it is not such an expression". This test asserts the documented contract.
    text = "9" * 5000 + " + 1"
    result = rules.parse_expression(text)
    assert result is None or result[1] == ["+"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_parse_expression_never_raises_on_random_text(text: str) -> None:
    result = rules.parse_expression(text)
    if result is not None:
        numbers, ops = result
        assert len(ops) == len(numbers) - 1
        assert set(ops) <= set(rules.OPERATORS)


# ---------------------------------------------------------------- extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: 42", (42, "answer_tag")),
        ("answer is -7", (-7, "answer_tag")),
        ("ANSWER = 1,234", (1234, "answer_tag")),
        ("The answer: **56**", (56, "answer_tag")),
        ("So the answer is $12$.", (12, "answer_tag")),
        ("answer:\t\t7", (7, "answer_tag")),
        ("Answer: - 5", (-5, "answer_tag")),
        ("Answer: +8", (8, "answer_tag")),
        ("\\boxed{99}", (99, "boxed")),
        ("we get \\boxed{ -3 } and 4 more", (-3, "boxed")),
        ("\\boxed{1} then \\boxed{2}", (2, "boxed")),
        ("blah 3 then 17", (17, "last_integer")),
        ("total 1,000,000 apples", (1000000, "last_integer")),
        ("Answer: \u221212", (-12, "answer_tag")),  # U+2212 MINUS SIGN
        ("Answer: \u201312", (-12, "answer_tag")),  # EN DASH
        ("Answer: \uff0d12", (-12, "answer_tag")),  # FULLWIDTH HYPHEN-MINUS
        ("Answer: 5 ... Answer: 6", (6, "answer_tag")),
        ("Answer: 5, \\boxed{9}, and 11", (5, "answer_tag")),  # the tag beats boxed and last int
        ("\\boxed{9} and then 11", (9, "boxed")),  # boxed beats last int
        ("Answer: 0042", (42, "answer_tag")),
        ("no digits here at all", (None, "none")),
        ("", (None, "none")),
        ("Answer: unknown", (None, "none")),
    ],
)
def test_extract_answer_tolerant(text: str, expected: tuple[int | None, str]) -> None:
    assert rules.extract_answer(text) == expected


def test_extract_answer_over_long_integers_are_no_answer() -> None:
    # Integers longer than MAX_ANSWER_DIGITS (60) are treated as no answer (and never reach int()).
    limit = rules.MAX_ANSWER_DIGITS
    assert rules.extract_answer("Answer: " + "7" * limit) == (int("7" * limit), "answer_tag")
    assert rules.extract_answer("Answer: " + "7" * (limit + 1)) == (None, "none")
    assert rules.extract_answer("Answer: " + "1" * 1000) == (None, "none")
    assert rules.extract_answer("1" * 1000) == (None, "none")
    # A rejected tag falls back to the later stages: here the last integer of the text.
    assert rules.extract_answer("Answer: " + "1" * 1000 + " or maybe 5") == (5, "last_integer")


def test_extract_answer_tab_inside_signed_tag_keeps_sign() -> None:
    # BUG (tasks/arith/rules.py, _INT vs _to_int): the tag pattern allows any whitespace between
    # sign and digits (``[-+]?\s*\d``) but _to_int only strips ' ', so "Answer: -\t5" fails the tag
    # stage and falls back to last_integer, returning +5 (the sign is silently dropped).
    assert rules.extract_answer("Answer: -\t5") == (-5, "answer_tag")


def test_extract_answer_1mb_random_text_is_fast() -> None:
    rnd = random.Random(1234)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 ,.:-=*$\n\t{}\\"
    text = "".join(rnd.choices(alphabet, k=1_000_000))
    start = time.perf_counter()
    value, how = rules.extract_answer(text)
    assert time.perf_counter() - start < 2.0  # hang guard, not a benchmark
    assert how in HOWS and (value is None) == (how == "none")

    for big in ("1" * 1_000_000, "Answer: 7 " * 100_000, "\u2212" * 1_000_000):
        start = time.perf_counter()
        rules.extract_answer(big)
        assert time.perf_counter() - start < 2.0


_CHILD = """
import json, sys, time
from tasks.arith.rules import extract_answer
text = {expr}
start = time.perf_counter()
value, how = extract_answer(text)
print(json.dumps([time.perf_counter() - start, value, how]))
"""

# Adversarial inputs for regex backtracking, as Python expressions built in the child process.
_BACKTRACKING_CASES = {
    # A model that writes "The answer is" followed by blank lines and no number. 2000 chars is the
    # team protocol's default message limit, so this input reaches the verifier unchanged.
    "answer_tag_whitespace": '"The answer is" + "\\n" * 1990 + "unknown"',
    "answer_tag_spaces": '"answer" + " " * 200 + "x"',
    "boxed_whitespace_1mb": '"\\\\boxed{" + " " * 1_000_000 + "x"',
}


def test_extract_answer_no_catastrophic_backtracking() -> None:
    # BUG (tasks/arith/rules.py, _ANSWER and _BOXED): consecutive optional whitespace groups
    # (``\s*(?:is|:|=)?\s*[:=]?\s*\**\s*\$?\s*[-+]?\s*`` in _ANSWER, ``\{\s*[-+]?\s*`` in
    # _BOXED) backtrack polynomially when no digit follows the whitespace: "answer" + 80 spaces +
    # "x" takes ~12 s, the 2000-char case never finishes in practice, and "\\boxed{" + 16000
    # spaces takes ~2.4 s (quadratic). Each case runs in its own child process, all in parallel,
    # so a hang costs one bounded timeout instead of the whole test session.
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(expr=expr)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, expr in _BACKTRACKING_CASES.items()
    }
    deadline = time.monotonic() + 4.0
    failures = []
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            failures.append(f"{name}: no result within 4 s")
            continue
        if proc.returncode != 0:
            failures.append(f"{name}: child failed: {err[-500:]}")
            continue
        elapsed, value, how = json.loads(out)
        if elapsed >= 2.0 or (value, how) != (None, "none"):
            failures.append(f"{name}: {elapsed:.2f} s -> {(value, how)}")
    assert not failures, "extract_answer backtracking: " + "; ".join(failures)


_CONTROL = st.characters(min_codepoint=0, max_codepoint=0x1F) | st.characters(
    min_codepoint=0x7F, max_codepoint=0x9F
)
_PIECES = st.sampled_from(
    ["answer", "Answer:", "is", "=", "\\boxed{", "}", "-", "\u2212", ",", "1", "42", "*", "$", " "]
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_extract_answer_random_unicode_never_raises(text: str) -> None:
    value, how = rules.extract_answer(text)
    assert how in HOWS
    assert (value is None) == (how == "none")
    assert value is None or isinstance(value, int)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CONTROL | _PIECES, max_size=40).map("".join))
def test_extract_answer_control_chars_and_answer_fragments_never_raise(text: str) -> None:
    value, how = rules.extract_answer(text)
    assert how in HOWS
    assert (value is None) == (how == "none")
    if value is not None:
        assert abs(value) < 10 ** (rules.MAX_ANSWER_DIGITS + 1)


@settings(max_examples=150, deadline=None)
@given(
    value=st.integers(-(10**30), 10**30),
    noise=st.text(alphabet="abcdefghij .!?\n", max_size=40),
    commas=st.booleans(),
)
def test_extract_answer_reads_tagged_integers(value: int, noise: str, commas: bool) -> None:
    shown = f"{value:,}" if commas else str(value)
    assert rules.extract_answer(f"{noise} 3 things. Answer: {shown}{noise}") == (
        value,
        "answer_tag",
    )


# ---------------------------------------------------------------- ArithTask: construction, sample


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_task_implements_protocols() -> None:
    task = ArithTask()
    assert isinstance(task, SupportsExpert)
    assert task.name == "arith" and task.interactive is False


def test_sample_is_deterministic_per_seed() -> None:
    task = ArithTask(digits=3, operators="+-*", operands=4)
    for seed in range(25):
        assert task.sample(_rng(seed)).to_dict() == task.sample(_rng(seed)).to_dict()


def test_sample_differs_across_seeds() -> None:
    task = ArithTask(digits=3, operators="+-*", operands=3)
    ids = {task.sample(_rng(seed)).id for seed in range(60)}
    assert len(ids) >= 55


def test_sample_stream_advances() -> None:
    task = ArithTask(digits=4)
    rng = _rng(0)
    ids = {task.sample(rng).id for _ in range(30)}
    assert len(ids) >= 28


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    digits=st.integers(1, 9),
    operands=st.integers(2, 6),
    operators=operator_sets,
    split=st.sampled_from(["train", "validation", "test"]),
)
def test_sample_respects_configuration(
    seed: int, digits: int, operands: int, operators: str, split: str
) -> None:
    task = ArithTask(digits=digits, operators=operators, operands=operands, split=split)
    problem = task.sample(_rng(seed))
    expression = problem.data["expression"]
    parsed = rules.parse_expression(expression)
    assert parsed is not None
    numbers, ops = parsed
    assert len(numbers) == operands
    assert set(ops) <= set(operators)
    for n in numbers:
        if digits == 1:
            assert 0 <= n <= 9
        else:
            assert len(str(n)) == digits
    assert problem.answer == rules.evaluate(numbers, ops) == reference_eval(numbers, ops)
    assert problem.split == split
    assert problem.id == "arith:" + expression.replace(" ", "")
    assert problem.meta["digits"] == digits
    assert problem.meta["operators"] == "".join(sorted(set(ops)))
    json.dumps(problem.to_dict())  # JSON-serialisable
    assert problem.to_dict()["answer"] == problem.answer


def test_sample_covers_ranges() -> None:
    one = ArithTask(digits=1, operators="+-*", operands=6)
    rng = _rng(7)
    seen_numbers: set[int] = set()
    seen_ops: set[str] = set()
    for _ in range(100):
        numbers, ops = rules.parse_expression(one.sample(rng).data["expression"])  # type: ignore[misc]
        seen_numbers |= set(numbers)
        seen_ops |= set(ops)
    assert seen_numbers == set(range(10))  # digits=1 allows 0..9
    assert seen_ops == {"+", "-", "*"}

    two = ArithTask(digits=2, operands=6)
    numbers_2 = set()
    for _ in range(400):
        numbers_2 |= set(rules.parse_expression(two.sample(rng).data["expression"])[0])  # type: ignore[index]
    assert min(numbers_2) == 10 and max(numbers_2) == 99


def test_duplicate_operators_are_collapsed() -> None:
    assert ArithTask(operators="++--").operators == "+-"


def test_invalid_arguments_report_every_problem() -> None:
    with pytest.raises(TaskConfigError) as info:
        ArithTask(digits=0, operators="/", operands=1, split="dev")
    err = info.value
    assert isinstance(err, ValueError)
    assert len(err.errors) == 4
    message = str(err)
    assert "4 problem(s)" in message
    for needle in ("digits", "0", "operators", "'/'", "operands", "split", "'dev'"):
        assert needle in message
    assert any("digits" in p for p in err.errors)
    assert any("operators" in p for p in err.errors)
    assert any("operands" in p for p in err.errors)
    assert any("split" in p for p in err.errors)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"digits": 10}, "digits"),
        ({"digits": 2.0}, "digits"),
        ({"operators": ""}, "operators"),
        ({"operators": "+/"}, "operators"),
        ({"operators": None}, "operators"),
        ({"operands": 7}, "operands"),
        ({"operands": "3"}, "operands"),
        ({"split": "Train"}, "split"),
    ],
)
def test_single_invalid_argument(kwargs: dict, field: str) -> None:
    with pytest.raises(TaskConfigError) as info:
        ArithTask(**kwargs)
    assert len(info.value.errors) == 1
    assert field in info.value.errors[0]


# ---------------------------------------------------------------- grade / score


def _problem(expression: str = "40 + 2", answer: int = 42) -> Problem:
    return Problem(
        id="arith:" + expression.replace(" ", ""), data={"expression": expression}, answer=answer
    )


def test_grade_correct() -> None:
    task = ArithTask(digits=3, operators="+-*", operands=3)
    problem = task.sample(_rng(3))
    score = task.grade(problem, f"Working... Answer: {problem.answer}")
    assert score == Score(
        1.0, True, str(problem.answer), {"reason": "correct", "extraction": "answer_tag"}
    )


def test_grade_wrong_answer() -> None:
    task = ArithTask()
    score = task.grade(_problem(), "I think the answer is 41")
    assert score.reward == 0.0 and score.correct is False
    assert score.answer == "41"
    assert score.details["reason"] == "wrong_answer"
    assert score.details["extraction"] == "answer_tag"


def test_grade_no_integer_found() -> None:
    score = ArithTask().grade(_problem(), "I refuse to answer.")
    assert score == Score(0.0, False, None, {"reason": "no_integer_found"})


def test_grade_normalises_answer() -> None:
    task = ArithTask()
    score = task.grade(_problem(), "Answer: 0042")
    assert score.correct and score.reward == 1.0 and score.answer == "42"
    score = task.grade(_problem("1000 + 234", 1234), "ANSWER = 1,234")
    assert score.correct and score.answer == "1234"
    negative = task.grade(_problem("1 - 13", -12), "Answer: \u221212")
    assert negative.correct and negative.answer == "-12"


def test_grade_uses_fallback_extractions() -> None:
    task = ArithTask()
    assert task.grade(_problem(), "\\boxed{42}").details == {
        "reason": "correct",
        "extraction": "boxed",
    }
    last = task.grade(_problem(), "it is 40 plus 2 which makes 42")
    assert last.correct and last.details["extraction"] == "last_integer"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_grade_never_raises(text: str) -> None:
    score = ArithTask().grade(_problem(), text)
    assert score.reward in (0.0, 1.0)
    assert score.correct == (score.reward == 1.0)
    assert score.details["reason"] in {"correct", "wrong_answer", "no_integer_found"}
    json.dumps(score.to_dict())


def test_score_without_final_message() -> None:
    task = ArithTask()
    episode = Episode(problem=_problem(), transcript=[], final_text=None)
    score = task.score(episode)
    assert score.reward == 0.0 and score.correct is False and score.answer is None
    assert score.details["reason"] == "no_final_message"


def test_score_grades_final_text_only() -> None:
    task = ArithTask()
    transcript = [Message("agent", "alice", "Answer: 42"), Message("agent", "bob", "Answer: 43")]
    wrong = task.score(Episode(_problem(), transcript, final_text="Answer: 43"))
    assert wrong.details["reason"] == "wrong_answer"
    right = task.score(Episode(_problem(), transcript, final_text="Answer: 42"))
    assert right.correct and right.reward == 1.0


# ---------------------------------------------------------------- expert_reply


def _team_context(task: ArithTask, problem: Problem) -> str:
    return (
        "You are a careful team member.\n"
        "### Problem\n"
        f"{task.prompt(problem)}\n"
        "[alice] Let me restate a smaller one first.\n"
        "Compute: 1 + 1\n"
        "[bob] Answer: 2\n"
        "### Your turn, carol\n"
    )


def test_prompt_contains_compute_line() -> None:
    task = ArithTask()
    problem = _problem("12 + 30", 42)
    assert task.prompt(problem).splitlines()[0] == "Compute: 12 + 30"
    assert "Answer:" in task.prompt(problem)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), operators=operator_sets)
def test_expert_uses_first_compute_line(seed: int, operators: str) -> None:
    task = ArithTask(digits=3, operators=operators, operands=3)
    problem = task.sample(_rng(seed))
    context = _team_context(task, problem)
    reply = task.expert_reply(context, _rng(seed), make_error=False)
    assert reply == f"Answer: {problem.answer}"
    assert task.grade(problem, reply).correct


def test_expert_first_line_differs_from_later_line() -> None:
    # Guard that the test above is meaningful: the distractor line would give 2.
    task = ArithTask()
    problem = _problem("40 + 2", 42)
    assert (
        task.expert_reply(_team_context(task, problem), _rng(0), make_error=False) == "Answer: 42"
    )


def test_expert_make_error_is_off_by_one_to_ten() -> None:
    task = ArithTask(digits=2, operators="+-*", operands=3)
    deltas = []
    for seed in range(300):
        problem = task.sample(_rng(seed))
        reply = task.expert_reply(_team_context(task, problem), _rng(seed), make_error=True)
        score = task.grade(problem, reply)
        assert score.details["reason"] == "wrong_answer"
        deltas.append(int(score.answer) - problem.answer)  # type: ignore[arg-type]
    assert all(1 <= abs(d) <= 10 for d in deltas)
    assert {abs(d) for d in deltas} == set(range(1, 11))
    assert min(deltas) < 0 < max(deltas)


@pytest.mark.parametrize(
    "context",
    [
        "",
        "hello there, no problem here",
        "Compute: 2 + ",
        "compute: 2 + 3",  # wrong case
        "Compute: import os",
        "\x00\x01\x02" * 100,
        "x" * 1_000_000,
    ],
)
def test_expert_without_problem_does_not_crash(context: str) -> None:
    reply = ArithTask().expert_reply(context, _rng(0), make_error=False)
    assert isinstance(reply, str) and reply
    assert rules.extract_answer(reply) == (None, "none")


def test_expert_huge_compute_line_does_not_crash() -> None:
    # BUG (tasks/arith/task.py expert_reply -> rules.parse_expression): an operand of more than 4300
    # digits makes int() raise ValueError (Python >= 3.11 int/str conversion limit), and a result of
    # more than 4300 digits makes the f-string raise the same way. The expert should reply, not raise.
    task = ArithTask()
    for context in (
        "Compute: " + "9" * 5000 + " + 1",
        "Compute: " + " * ".join(["999999999"] * 600),
    ):
        reply = task.expert_reply(context, _rng(0), make_error=False)
        assert isinstance(reply, str)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.booleans())
def test_expert_never_raises_on_random_context(context: str, make_error: bool) -> None:
    assert isinstance(ArithTask().expert_reply(context, _rng(0), make_error=make_error), str)


def test_bool_is_not_an_integer_argument() -> None:
    with pytest.raises(TaskConfigError) as err:
        ArithTask(digits=True, operands=False)  # type: ignore[arg-type]
    assert len(err.value.errors) == 2


def test_grade_with_a_missing_gold_answer_is_a_scored_outcome() -> None:
    score = ArithTask().grade(
        Problem(id="x", data={"expression": "1 + 1"}, answer=None), "Answer: 2"
    )
    assert (score.reward, score.correct, score.details["reason"]) == (
        0.0,
        False,
        "invalid_gold_answer",
    )
