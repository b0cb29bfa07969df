"""Gold answers in Python/SymPy notation are graded as the expressions they are (issue #36):
``**`` and ``*`` no longer parse as something else, so a wrong answer is rejected and the right
one in LaTeX accepted; every gold, perturbed by one digit or one sign, is rejected."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tasks.math.generate import GENERATORS
from tasks.math.notation import is_python_notation, to_latex
from tasks.math.verifier import verify_answer

SYMPY_GOLDS = [
    "x**2 + 3*x",
    "-x**9 + 7*x**7 + 9*x**4/2 + C",
    "2**(n + 1) - 1",
    "exp(-x**2)",
    "sqrt(2)*x + 1",
    "3*log(x) + 5",
    "x**3/3 - 4*x + C",
]


def test_sympy_notation_is_rewritten_as_latex_and_latex_is_left_alone() -> None:
    assert to_latex("x**2 + 3*x") == "x^{2} + 3 \\cdot x"
    assert to_latex("2**(n+1) - 1") == "2^{n+1} - 1"
    assert to_latex("exp(-x**2)") == "e^{-x^{2}}"
    assert to_latex("sqrt(2)*x") == "\\sqrt{2} \\cdot x"
    for latex in ("x^2 + 3x", "\\frac{1}{2}", "-5", "(-9, 8)", "2\\cdot x"):
        assert not is_python_notation(latex) and to_latex(latex) == latex


@pytest.mark.parametrize(
    ("gold", "answer", "correct"),
    [
        ("x**2 + 3*x", "x**5 + 3*x", False),  # graded right before the rewrite
        ("x**2 + 3*x", "x^2 + 3x", True),  # graded wrong before
        ("x**2 + 3*x", "3x + x^{2}", True),
        ("x**2 + 3*x", "3", False),
        ("-x**9 + 7*x**7 + 9*x**4/2 + C", "-x**0 + 7*x**7 + 9*x**4/2 + C", False),
        ("-x**9 + 7*x**7 + 9*x**4/2 + C", "-x^9+7x^7+\\frac{9x^4}{2}+C", True),
        ("x^{2} + 3x", "x**2 + 3*x", True),  # a SymPy-notation answer against LaTeX gold
        ("x^{2} + 3x", "x**5 + 3*x", False),
    ],
)
def test_sympy_gold_answers_are_graded_as_expressions(
    gold: str, answer: str, correct: bool
) -> None:
    assert verify_answer(gold, answer).correct is correct


def _perturbed(gold: str) -> list[str]:
    """``gold`` with its last digit changed, and with one sign flipped."""
    digits = [m.start() for m in re.finditer(r"\d", gold)]
    out = []
    if digits:
        i = digits[-1]
        out.append(gold[:i] + str((int(gold[i]) + 1) % 10) + gold[i + 1 :])
    if gold.startswith("-"):
        out.append(gold[1:])
    elif "," in gold and "-" in gold:  # a tuple or a list of roots: one component's sign
        out.append(gold.replace("-", "", 1))
    else:
        out.append("-" + gold)
    return out


def _golds() -> list[str]:
    rng = np.random.default_rng(0)
    generated = [make(rng, d).answer for make in GENERATORS.values() for d in (1, 2, 3)]
    return generated + SYMPY_GOLDS


@pytest.mark.parametrize("gold", _golds())
def test_every_gold_matches_itself_and_no_perturbed_copy(gold: str) -> None:
    assert verify_answer(gold, gold).correct, gold
    for wrong in _perturbed(gold):
        assert not verify_answer(gold, wrong).correct, (gold, wrong)
