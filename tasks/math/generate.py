"""Generated algebra problems with exact answers (pure: ``rng`` in, a :class:`Generated` out).

Every generator computes its answer with :class:`fractions.Fraction` (exact) and writes it in
LaTeX the way MATH-500 writes answers: integers plain, fractions ``\\frac{p}{q}`` in lowest terms
with the sign in front, ordered tuples ``(x, y)``, sets of solutions ``a, b`` ascending.

Kinds and what ``difficulty`` (1-3) changes:

* ``linear``: solve for x. 1: ``ax + b = c`` with an integer root; 2: ``ax + b = cx + d`` with
  a rational root; 3: ``a(x + b) - c = d(x - e)`` with larger coefficients.
* ``fraction``: fraction arithmetic. 1: ``p/q + r/s``; 2: one of ``+ - × ÷``; 3: three
  fractions, two operators (``×``/``÷`` bind tighter).
* ``polynomial``: evaluate a polynomial of degree ``difficulty + 1``; at 3 the point is a
  fraction.
* ``system``: a linear system with an integer solution. 1: 2x2 with positive coefficients;
  2: 2x2 with signed coefficients; 3: 3x3. Answer: the tuple ``(x, y)`` or ``(x, y, z)``.
* ``quadratic``: all real roots. 1: monic with integer roots; 2: a non-monic multiple;
  3: rational roots. Answer: the roots, ascending, separated by commas (a set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

DIFFICULTIES = (1, 2, 3)


@dataclass(frozen=True)
class Generated:
    """One generated problem.

    Attributes:
        kind: the generator's name.
        question: the problem statement (Markdown with ``$...$`` LaTeX).
        answer: the exact gold answer in LaTeX.
        subject: the MATH subject it belongs to (``"Algebra"`` or ``"Prealgebra"``).
        extra: kind-specific data (the equation, the coefficients) for reference.
    """

    kind: str
    question: str
    answer: str
    subject: str
    extra: dict[str, Any] = field(default_factory=dict)


def _int(rng: np.random.Generator, low: int, high: int, *, nonzero: bool = False) -> int:
    """A uniform integer in ``[low, high]`` (excluding 0 if ``nonzero``)."""
    while True:
        value = int(rng.integers(low, high + 1))
        if value or not nonzero:
            return value


def latex_number(value: Fraction | int) -> str:
    """``7`` -> ``"7"``, ``Fraction(-7, 3)`` -> ``"-\\frac{7}{3}"`` (lowest terms)."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def latex_linear(terms: Sequence[tuple[Fraction | int, str]]) -> str:
    """A sum of ``coefficient * monomial`` terms in LaTeX; zero terms dropped, ``1x`` -> ``x``.

    ``[(3, "x"), (-1, "y"), (5, "")]`` -> ``"3x - y + 5"``; all zero -> ``"0"``.
    """
    parts: list[str] = []
    for coef, monomial in terms:
        coef = Fraction(coef)
        if coef == 0:
            continue
        magnitude = abs(coef)
        body = latex_number(magnitude) if (magnitude != 1 or not monomial) else ""
        text = body + monomial
        if not parts:
            parts.append(("-" if coef < 0 else "") + text)
        else:
            parts.append(("- " if coef < 0 else "+ ") + text)
    return " ".join(parts) if parts else "0"


def _power(degree: int) -> str:
    return (
        ""
        if degree == 0
        else "x"
        if degree == 1
        else f"x^{{{degree}}}"
        if degree > 9
        else f"x^{degree}"
    )


def linear(rng: np.random.Generator, difficulty: int) -> Generated:
    """Solve a linear equation in x (see the module docstring)."""
    if difficulty == 1:
        x = _int(rng, -10, 10)
        a, b = _int(rng, 2, 9), _int(rng, -20, 20, nonzero=True)
        equation = f"{latex_linear([(a, 'x'), (b, '')])} = {a * x + b}"
        root = Fraction(x)
    elif difficulty == 2:
        a, c = _int(rng, -9, 9, nonzero=True), _int(rng, -9, 9, nonzero=True)
        while c == a:
            c = _int(rng, -9, 9, nonzero=True)
        b, d = _int(rng, -20, 20), _int(rng, -20, 20)
        equation = f"{latex_linear([(a, 'x'), (b, '')])} = {latex_linear([(c, 'x'), (d, '')])}"
        root = Fraction(d - b, a - c)
    else:
        a, d = _int(rng, 2, 12), _int(rng, 2, 12)
        while d == a:
            d = _int(rng, 2, 12)
        b, c, e = _int(rng, 1, 15), _int(rng, 1, 30), _int(rng, 1, 15)
        equation = f"{a}(x + {b}) - {c} = {d}(x - {e})"
        root = Fraction(-d * e - a * b + c, a - d)
    question = (
        f"Solve for $x$: ${equation}$. Express your answer as an integer or a common fraction."
    )
    return Generated("linear", question, latex_number(root), "Algebra", {"equation": equation})


_OPS: dict[str, Callable[[Fraction, Fraction], Fraction]] = {
    "+": lambda p, q: p + q,
    "-": lambda p, q: p - q,
    "\\times": lambda p, q: p * q,
    "\\div": lambda p, q: p / q,
}


def fraction(rng: np.random.Generator, difficulty: int) -> Generated:
    """Fraction arithmetic (see the module docstring)."""
    count = 3 if difficulty == 3 else 2
    high = 9 if difficulty == 1 else 12
    pairs = [(_int(rng, 1, high - 1), _int(rng, 2, high)) for _ in range(count)]
    values = [Fraction(p, q) for p, q in pairs]
    names = ["+"] if difficulty == 1 else list(_OPS)
    ops = [names[int(rng.integers(len(names)))] for _ in range(count - 1)]
    # Precedence: fold the multiplicative operators first, then add and subtract left to right.
    terms, signs = [values[0]], [1]
    for op, value in zip(ops, values[1:]):
        if op in ("\\times", "\\div"):
            terms[-1] = _OPS[op](terms[-1], value)
        else:
            terms.append(value)
            signs.append(1 if op == "+" else -1)
    result = sum((s * t for s, t in zip(signs, terms)), Fraction(0))
    parts = [f"\\frac{{{pairs[0][0]}}}{{{pairs[0][1]}}}"]
    for op, (p, q) in zip(ops, pairs[1:]):
        parts += [op, f"\\frac{{{p}}}{{{q}}}"]
    expression = " ".join(parts)
    question = (
        f"Compute ${expression}$. Express your answer as a common fraction in lowest terms "
        "(or an integer)."
    )
    return Generated(
        "fraction", question, latex_number(result), "Prealgebra", {"expression": expression}
    )


def polynomial(rng: np.random.Generator, difficulty: int) -> Generated:
    """Evaluate a polynomial at a point (see the module docstring)."""
    degree = difficulty + 1
    coefs = [_int(rng, -5, 5) for _ in range(degree)] + [_int(rng, -5, 5, nonzero=True)]
    if difficulty == 3:
        point = Fraction(_int(rng, -5, 5, nonzero=True), _int(rng, 2, 4))
    else:
        point = Fraction(_int(rng, -3, 3) if difficulty == 1 else _int(rng, -5, 5))
    value = sum((Fraction(c) * point**k for k, c in enumerate(coefs)), Fraction(0))
    poly = latex_linear([(coefs[k], _power(k)) for k in range(degree, -1, -1)])
    at = latex_number(point)
    question = f"Let $p(x) = {poly}$. Compute $p\\left({at}\\right)$."
    if difficulty == 3:
        question += " Express your answer as a common fraction in lowest terms (or an integer)."
    extra = {"poly": poly, "coefficients": coefs, "point": str(point)}
    return Generated("polynomial", question, latex_number(value), "Algebra", extra)


def system(rng: np.random.Generator, difficulty: int) -> Generated:
    """A linear system with a unique integer solution (see the module docstring)."""
    names = ["x", "y", "z"] if difficulty == 3 else ["x", "y"]
    n = len(names)
    solution = [_int(rng, -10, 10) for _ in range(n)]
    while True:
        low = 1 if difficulty == 1 else -9
        matrix = [[_int(rng, low, 9, nonzero=True) for _ in range(n)] for _ in range(n)]
        if _det(matrix) != 0:
            break
    lines = []
    for row in matrix:
        rhs = sum(c * v for c, v in zip(row, solution))
        lines.append(f"${latex_linear(list(zip(row, names)))} = {rhs}$")
    tuple_names = "(" + ", ".join(names) + ")"
    question = (
        "Solve the system of equations\n"
        + "\n".join(lines)
        + f"\nEnter your answer as the ordered {'pair' if n == 2 else 'triple'} ${tuple_names}$."
    )
    answer = "(" + ", ".join(str(v) for v in solution) + ")"
    return Generated("system", question, answer, "Algebra", {"matrix": matrix})


def _det(m: list[list[int]]) -> int:
    if len(m) == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def quadratic(rng: np.random.Generator, difficulty: int) -> Generated:
    """All real roots of a quadratic that factors over the rationals (see the module docstring)."""
    if difficulty == 3:
        # (p x - q)(r x - s) with p, r >= 1: roots q/p and s/r.
        p, r = _int(rng, 1, 4), _int(rng, 2, 5)
        q, s = _int(rng, -7, 7, nonzero=True), _int(rng, -7, 7, nonzero=True)
        coefs = (p * r, -(p * s + q * r), q * s)
        roots = {Fraction(q, p), Fraction(s, r)}
    else:
        k = 1 if difficulty == 1 else _int(rng, 2, 4) * (1 if rng.random() < 0.5 else -1)
        r1, r2 = _int(rng, -9, 9), _int(rng, -9, 9)
        coefs = (k, -k * (r1 + r2), k * r1 * r2)
        roots = {Fraction(r1), Fraction(r2)}
    poly = latex_linear([(coefs[0], "x^2"), (coefs[1], "x"), (coefs[2], "")])
    question = (
        f"Find all real solutions of ${poly} = 0$. Enter all the solutions, separated by commas."
    )
    answer = ", ".join(latex_number(v) for v in sorted(roots))
    extra = {"poly": poly, "coefficients": list(coefs)}
    return Generated("quadratic", question, answer, "Algebra", extra)


GENERATORS: dict[str, Callable[[np.random.Generator, int], Generated]] = {
    "linear": linear,
    "fraction": fraction,
    "polynomial": polynomial,
    "system": system,
    "quadratic": quadratic,
}
"""Every generator by kind name."""
