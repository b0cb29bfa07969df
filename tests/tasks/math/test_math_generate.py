"""Generated Math problems: exact answers, seeded determinism, LaTeX helpers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tasks.math.generate import (
    DIFFICULTIES,
    GENERATORS,
    fraction,
    latex_linear,
    latex_number,
    linear,
    polynomial,
    quadratic,
    system,
)


def test_latex_number() -> None:
    assert latex_number(7) == "7"
    assert latex_number(Fraction(-28, 6)) == "-\\frac{14}{3}"
    assert latex_number(Fraction(6, 3)) == "2"


def test_latex_linear() -> None:
    assert latex_linear([(3, "x"), (-1, "y"), (5, "")]) == "3x - y + 5"
    assert latex_linear([(-1, "x^2"), (0, "x"), (-4, "")]) == "-x^2 - 4"
    assert latex_linear([(0, "x"), (0, "")]) == "0"
    assert latex_linear([(1, ""), (Fraction(1, 2), "x")]) == "1 + \\frac{1}{2}x"


@pytest.mark.parametrize("kind", sorted(GENERATORS))
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_same_seed_same_problem(kind: str, difficulty: int) -> None:
    make = GENERATORS[kind]
    a = [make(np.random.default_rng(7), difficulty) for _ in range(3)]
    b = [make(np.random.default_rng(7), difficulty) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(7)
    many = {make(rng, difficulty).question for _ in range(30)}
    assert len(many) > 10  # and the generator varies


def _solve(equation: str) -> Fraction:
    """Solves ``<linear in x> = <linear in x>`` written by ``linear`` at difficulty 1 or 2."""

    def side(text: str) -> tuple[Fraction, Fraction]:
        coef, const = Fraction(0), Fraction(0)
        for token in text.replace("- ", "-").replace("+ ", "").split():
            if token.endswith("x"):
                body = token[:-1]
                coef += Fraction({"": 1, "-": -1}.get(body, body or 1))
            else:
                const += Fraction(token)
        return coef, const

    left, right = equation.split(" = ")
    (a, b), (c, d) = side(left), side(right)
    return (d - b) / (a - c)


@pytest.mark.parametrize("difficulty", [1, 2])
def test_linear_answer_solves_the_equation(difficulty: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        made = linear(rng, difficulty)
        assert made.answer == latex_number(_solve(made.extra["equation"]))


def test_linear_difficulty_one_has_integer_roots() -> None:
    rng = np.random.default_rng(1)
    assert all("frac" not in linear(rng, 1).answer for _ in range(50))


def test_fraction_operands_and_answer_are_exact() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        made = fraction(rng, 1)
        parts = made.extra["expression"].replace("\\frac{", "").replace("}{", "/").split(" + ")
        total = sum((Fraction(p.rstrip("}")) for p in parts), Fraction(0))
        assert made.answer == latex_number(total)


def test_system_answer_satisfies_every_equation() -> None:
    rng = np.random.default_rng(3)
    for difficulty in DIFFICULTIES:
        for _ in range(20):
            made = system(rng, difficulty)
            values = [int(v) for v in made.answer.strip("()").split(", ")]
            lines = [ln for ln in made.question.splitlines() if ln.startswith("$")]
            assert len(lines) == len(values) == len(made.extra["matrix"])
            for row, line in zip(made.extra["matrix"], lines):
                rhs = int(line.strip("$").split(" = ")[1])
                assert sum(c * v for c, v in zip(row, values)) == rhs


def _number(text: str) -> Fraction:
    """Reads ``latex_number`` output back: ``"-\\frac{7}{3}"`` -> ``Fraction(-7, 3)``."""
    if "frac" not in text:
        return Fraction(int(text))
    sign = -1 if text.startswith("-") else 1
    num, den = text.lstrip("-").removeprefix("\\frac{").removesuffix("}").split("}{")
    return sign * Fraction(int(num), int(den))


def test_quadratic_roots_are_sorted_exact_and_complete() -> None:
    rng = np.random.default_rng(4)
    for difficulty in DIFFICULTIES:
        for _ in range(30):
            made = quadratic(rng, difficulty)
            a, b, c = made.extra["coefficients"]
            roots = [_number(r) for r in made.answer.split(", ")]
            assert roots == sorted(set(roots))
            assert all(a * r * r + b * r + c == 0 for r in roots)
            vieta = -Fraction(b, a)  # the sum of the roots with multiplicity
            assert sum(roots) == vieta or (len(roots) == 1 and 2 * roots[0] == vieta)


def test_polynomial_value_is_exact() -> None:
    rng = np.random.default_rng(5)
    for difficulty in DIFFICULTIES:
        for _ in range(30):
            made = polynomial(rng, difficulty)
            coefs, point = made.extra["coefficients"], Fraction(made.extra["point"])
            assert len(coefs) == difficulty + 2 and coefs[-1] != 0
            value = sum(Fraction(c) * point**k for k, c in enumerate(coefs))
            assert _number(made.answer) == value
