"""Math grading through math-verify: BENCHMARKS.md's tricky cases, the hard timeout, threads and
daemonic worker processes."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tasks.math.grading import grade_answer
from tasks.math.verifier import VerifierPool, default_pool

TOWER = "\\boxed{9^{9^{9^{9}}}}"


@pytest.fixture(scope="module", autouse=True)
def warm_pool() -> None:
    """Starts a worker so that timing assertions do not include the one-off start-up."""
    assert grade_answer("1", "\\boxed{1}").correct


@pytest.mark.parametrize(
    ("gold", "text", "correct"),
    [
        ("\\frac{14}{3}", "\\boxed{\\dfrac{28}{6}}", True),
        ("\\frac{14}{3}", "\\boxed{4.6667}", False),  # 6-digit rounding: not equal
        ("33", "\\boxed{033}", True),  # AIME leading zeros
        ("10", "\\boxed{10\\text{ cm}}", True),  # units
        ("1000000", "\\boxed{1,000,000}", True),  # thousands separators
        ("2, 3", "\\boxed{3, 2}", True),  # compared as sets
        ("2, 3", "\\boxed{3}", False),
        ("\\{1, 2\\}", "\\boxed{2, 1}", True),
        ("(2, -3)", "\\boxed{(2,-3)}", True),  # tuples are ordered
        ("(2, -3)", "\\boxed{(-3, 2)}", False),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3, \\pi/2)}", True),
        ("12", "\\boxed{11} is a guess; the final answer is \\boxed{12}", True),  # last box wins
        ("11", "\\boxed{11} is a guess; the final answer is \\boxed{12}", False),
        ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{\\sqrt3}{2}}", True),  # nested braces
        ("\\frac{1}{6}", "so \\fbox{\\frac{1}{6}}", True),
        ("\\frac{1}{6}", "\\boxed{\\frac{2}{12}}", True),  # unreduced fraction
        ("30^\\circ", "\\boxed{30}", True),
        ("30", "\\boxed{30^\\circ}", True),
        ("50\\%", "\\boxed{50}", True),
        ("0.5", "\\boxed{50\\%}", True),
        ("(-\\infty, 3)", "\\boxed{(-\\infty, 3)}", True),
        ("(-\\infty, 3)", "\\boxed{x < 3}", False),  # gold interval vs predicted inequality
        ("x < 3", "\\boxed{(-\\infty, 3)}", True),  # not symmetric: gold first
        ("[2, 5)", "\\boxed{2 \\le x < 5}", False),
        ("[2, 5)", "\\boxed{[2, 5)}", True),
        ("5", "\\boxed{x = 5}", True),
        ("-\\frac{7}{3}", "Answer: $-7/3$", True),  # the Answer: last-line rule
        ("\\text{Evelyn}", "\\boxed{\\text{Evelyn}}", True),
    ],
)
def test_benchmark_cases(gold: str, text: str, correct: bool) -> None:
    score = grade_answer(gold, text)
    assert score.correct is correct, dict(score.details)
    assert score.reward == float(correct)
    assert score.details["reason"] == ("correct" if correct else "wrong_answer")


def test_equivalent_answers_vote_together() -> None:
    a = grade_answer("\\frac{14}{3}", "\\boxed{\\dfrac{28}{6}}").answer
    b = grade_answer("\\frac{14}{3}", "\\boxed{\\frac{14}{3}}").answer
    assert a == b == "14/3"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The answer is 5.", "no_answer"),
        ("", "no_answer"),
        ("\\boxed{5", "unbalanced_box"),
        ("\\boxed{}", "empty_box"),
        ("\\boxed{\\text{}}", "unparseable_answer"),
        ("\\boxed{" + "1+" * 600 + "1}", "answer_too_long"),
    ],
)
def test_failures_are_scored_with_a_reason(text: str, reason: str) -> None:
    score = grade_answer("5", text)
    assert (score.correct, score.reward, score.details["reason"]) == (False, 0.0, reason)


def test_answer_length_cap_is_configurable() -> None:
    assert grade_answer("5", "\\boxed{5}", max_answer_chars=1).correct
    assert grade_answer("15", "\\boxed{15}", max_answer_chars=1).details["reason"] == (
        "answer_too_long"
    )


def test_think_format() -> None:
    text = "<think>it might be \\boxed{4}</think>The answer is \\boxed{5}."
    assert grade_answer("5", text, require_think_format=True).correct
    missing = grade_answer("5", "The answer is \\boxed{5}.", require_think_format=True)
    assert not missing.correct
    assert missing.details["reason"] == "missing_think_close"
    assert missing.details["format_error"] is True
    assert grade_answer("5", "The answer is \\boxed{5}.", require_think_format=False).correct


def test_invalid_gold_is_a_score() -> None:
    assert grade_answer(None, "\\boxed{5}").details["reason"] == "invalid_gold"  # type: ignore[arg-type]
    assert grade_answer("  ", "\\boxed{5}").details["reason"] == "invalid_gold"


def test_tower_of_exponents_times_out_within_the_limit() -> None:
    limit = 1.0
    start = time.monotonic()
    score = grade_answer("9", TOWER, timeout_s=limit)
    elapsed = time.monotonic() - start
    assert (score.correct, score.details["reason"]) == (False, "timeout")
    assert score.details["timeout_s"] == limit
    assert elapsed < limit + 0.5, elapsed
    # The killed worker is replaced at once, in the background: grading goes on.
    assert grade_answer("4", "\\boxed{2+2}").correct


def test_timeouts_are_not_cached() -> None:
    pool = VerifierPool(max_workers=1)
    try:
        assert pool.verify("9", "9^{9^{9^{9}}}", 0.25).status == "timeout"
        assert pool.verify("9", "9^{9^{9^{9}}}", 0.25).status == "timeout"
        assert pool.verify("4", "2+2", 5.0).correct
        assert pool.started == 3  # the first worker, then one replacement per timeout
    finally:
        pool.close()


def test_grading_inside_threads() -> None:
    cases = [
        ("\\frac{14}{3}", "\\boxed{\\dfrac{28}{6}}", "correct"),
        ("12", "\\boxed{13}", "wrong_answer"),
        ("9", TOWER, "timeout"),
        ("33", "Answer: 033", "correct"),
        ("2, 3", "\\boxed{3,2}", "correct"),
        ("7", "no box here", "no_answer"),
    ]

    def grade(case: tuple[str, str, str]) -> str:
        return str(grade_answer(case[0], case[1], timeout_s=1.0).details["reason"])

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=3) as executor:
        reasons = list(executor.map(grade, cases))
    assert reasons == [c[2] for c in cases]
    assert time.monotonic() - start < 30.0


def test_pool_threads_share_bounded_workers() -> None:
    pool = VerifierPool(max_workers=2)
    try:
        with ThreadPoolExecutor(max_workers=6) as executor:
            verdicts = list(executor.map(lambda i: pool.verify(str(i), f"{i}+0", 5.0), range(12)))
        assert all(v.status == "ok" and v.correct for v in verdicts)
        assert pool.started <= 2
    finally:
        pool.close()


def test_a_forked_child_gets_its_own_pool() -> None:
    pool = default_pool()
    pool.pid = -1  # what a forked child sees: the pool belongs to another process
    try:
        assert default_pool() is not pool
    finally:
        pool.pid = 0  # stays orphaned; its workers are closed here
        pool.close()


def _grade_in_child(gold: str, text: str, timeout_s: float) -> dict[str, Any]:
    return grade_answer(gold, text, timeout_s=timeout_s).to_dict()


def test_grading_inside_a_daemonic_worker_process() -> None:
    # multiprocessing.Pool workers are daemonic and may not start multiprocessing children; the
    # verifier's subprocess workers still work there, and so does the deadline.
    with multiprocessing.get_context("spawn").Pool(1) as procs:
        ok = procs.apply(_grade_in_child, ("\\frac{14}{3}", "\\boxed{\\dfrac{28}{6}}", 5.0))
        slow = procs.apply(_grade_in_child, ("9", TOWER, 1.0))
    assert ok["correct"] is True
    assert slow["details"]["reason"] == "timeout"
