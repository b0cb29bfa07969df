"""Pure answer-extraction rules of the Math task: last box by brace counting, think format,
``Answer:`` last line."""

from __future__ import annotations

import time

import pytest

from tasks.math.extract import Extraction, answer_line, extract_answer, last_boxed, matching_brace


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so $\\boxed{12}$.", "12"),
        ("\\boxed{11} first, but the final answer is \\boxed{12}", "12"),
        ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed{\\left\\{ x \\right.}", "\\left\\{ x \\right."),  # escaped brace not counted
        ("\\boxed { 7 }", "7"),
        ("\\fbox{42}", "42"),
        ("\\boxed{1} then \\fbox{2}", "2"),
        ("\\fbox{1} then \\boxed{2}", "2"),
        ("\\boxed{a \\\\ {b}}", "a \\\\ {b}"),  # \\ is a line break; the { after it counts
    ],
)
def test_last_box_content(text: str, expected: str) -> None:
    assert last_boxed(text).answer == expected


def test_box_kind_is_reported() -> None:
    assert last_boxed("\\fbox{3}").how == "fbox"
    assert last_boxed("\\boxed{3}").how == "boxed"


def test_boxedx_is_not_a_box() -> None:
    assert last_boxed("\\boxedtext{3}") == Extraction(None, "none", "no_answer")


def test_unclosed_last_box_is_no_answer_even_after_a_closed_one() -> None:
    found = last_boxed("\\boxed{1} and finally \\boxed{\\frac{2}{3}")
    assert found == Extraction(None, "boxed", "unbalanced_box")


def test_empty_box() -> None:
    assert last_boxed("\\boxed{  }") == Extraction(None, "boxed", "empty_box")


def test_matching_brace_counts_and_skips_escapes() -> None:
    assert matching_brace("{a{b}c}", 0) == 6
    assert matching_brace("{a\\}b}", 0) == 5
    assert matching_brace("{{}", 0) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("work\nAnswer: 5", "5"),
        ("work\nanswer: $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("work\n**Final Answer:** 033\n\n  ", "033"),
        ("## Answer: \\(x = 3\\)", "x = 3"),
        ("Answer：7", "7"),  # full-width colon
        ("Answer: 10 cm.", "10 cm"),
    ],
)
def test_answer_line_rule(text: str, expected: str) -> None:
    assert answer_line(text) == Extraction(expected, "answer_line")


@pytest.mark.parametrize(
    "text",
    [
        "Answer: 5\nbut wait, let me check",  # not the last line
        "The answer is 5",  # no 'Answer:' at the start
        "Answer:   ",
        "",
    ],
)
def test_answer_line_rule_rejects(text: str) -> None:
    assert answer_line(text).answer is None


def test_box_wins_over_answer_line() -> None:
    found = extract_answer("\\boxed{4}\nAnswer: 5")
    assert found == Extraction("4", "boxed")


def test_think_format_grades_only_after_last_close_tag() -> None:
    text = "<think>maybe \\boxed{1}</think> hmm </think> so \\boxed{2}"
    assert extract_answer(text, require_think_format=True).answer == "2"
    assert extract_answer(text, require_think_format=False).answer == "2"
    inside_only = "<think>so \\boxed{1}</think> I am done."
    assert extract_answer(inside_only, require_think_format=True).reason == "no_answer"
    assert extract_answer(inside_only).answer == "1"  # think format off: the box counts


def test_missing_think_tag_is_a_format_failure() -> None:
    found = extract_answer("<think>never closed \\boxed{3}", require_think_format=True)
    assert found == Extraction(None, "none", "missing_think_close")


def test_extraction_is_linear_on_adversarial_text() -> None:
    texts = [
        "\\boxed{" * 50_000,
        "{" * 100_000 + "\\boxed{",
        "Answer:" + " *" * 50_000 + "x",
        ("a" * 1000 + "\n") * 200,
    ]
    start = time.perf_counter()
    for text in texts:
        extract_answer(text)
        extract_answer(text, require_think_format=True)
    assert time.perf_counter() - start < 2.0
