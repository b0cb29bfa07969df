"""Pure rules of integer arithmetic: generation, exact evaluation and tolerant answer extraction.

Nothing here evaluates model text as code: expressions are parsed by a small tokenizer that accepts
only integers and the operators ``+ - *``, and answers are read with regular expressions and
``int()`` on bounded digit strings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

OPERATORS = "+-*"
MAX_ANSWER_DIGITS = 60  # longer "integers" in model output are treated as no answer

_TOKEN = re.compile(r"\s*(\d+|[+\-*])")
# Unicode minus signs and dashes models emit in place of '-'.
_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2014": "-", "\uff0d": "-"})
MAX_OPERANDS = 50  # keeps every value far below Python's int/str conversion limit
# Every repetition below is bounded so that no input can make the regex engine backtrack for long
# (an unbounded run of optional whitespace groups is quadratic or worse on adversarial text).
_SIGNED = r"([-+]?)[ \t]{0,3}(\d[\d,]*)"
_ANSWER = re.compile(r"answer(?:\s{1,10}is)?[\s:=*$]{0,12}" + _SIGNED, re.IGNORECASE)
_BOXED = re.compile(r"\\boxed[ \t]{0,3}\{[ \t]{0,3}" + _SIGNED + r"[ \t]{0,3}\}")
_ANY_INT = re.compile(r"(?<![\w.])(-?)(\d[\d,]*)")


def generate(
    rng: np.random.Generator, digits: int, operators: str, operands: int
) -> tuple[list[int], list[str]]:
    """Draws ``operands`` integers of exactly ``digits`` digits and ``operands - 1`` operators."""
    low = 0 if digits == 1 else 10 ** (digits - 1)
    numbers = [int(x) for x in rng.integers(low, 10**digits, size=operands)]
    ops = [operators[int(i)] for i in rng.integers(0, len(operators), size=operands - 1)]
    return numbers, ops


def render(numbers: Sequence[int], ops: Sequence[str]) -> str:
    """``[12, 3], ['+']`` -> ``"12 + 3"``."""
    parts = [str(numbers[0])]
    for op, number in zip(ops, numbers[1:]):
        parts += [op, str(number)]
    return " ".join(parts)


def evaluate(numbers: Sequence[int], ops: Sequence[str]) -> int:
    """Exact value with the usual precedence (``*`` before ``+`` and ``-``, left to right)."""
    if len(ops) != len(numbers) - 1:
        raise ValueError(f"expected {len(numbers) - 1} operators, got {len(ops)}")
    terms = [numbers[0]]
    signs = [1]
    for op, number in zip(ops, numbers[1:]):
        if op == "*":
            terms[-1] *= number
        elif op == "+" or op == "-":
            terms.append(number)
            signs.append(1 if op == "+" else -1)
        else:
            raise ValueError(f"unknown operator {op!r}; expected one of {OPERATORS!r}")
    return sum(s * t for s, t in zip(signs, terms))


def parse_expression(text: str) -> tuple[list[int], list[str]] | None:
    """Parses ``"12 + 3 * 4"`` into numbers and operators.

    Returns ``None`` if the text is not such an expression, or has more than ``MAX_OPERANDS``
    operands or an operand longer than ``MAX_ANSWER_DIGITS`` digits.
    """
    pos, tokens = 0, []
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            return None
        tokens.append(match.group(1))
        pos = match.end()
    if not tokens or len(tokens) % 2 == 0:
        return None
    numbers, ops = tokens[0::2], tokens[1::2]
    if not all(n.isdigit() for n in numbers) or not all(o in OPERATORS for o in ops):
        return None
    if len(numbers) > MAX_OPERANDS or any(len(n) > MAX_ANSWER_DIGITS for n in numbers):
        return None
    return [int(n) for n in numbers], ops


def _to_int(sign: str, digits: str) -> int | None:
    body = digits.replace(",", "")
    if not body.isdigit() or len(body) > MAX_ANSWER_DIGITS:
        return None
    return -int(body) if sign == "-" else int(body)


def extract_answer(text: str) -> tuple[int | None, str]:
    """Reads the integer answer from free text, tolerantly.

    Order of preference: the last ``Answer: N`` (also ``answer is N``, ``answer = N``), else the
    last ``\\boxed{N}``, else the last integer anywhere in the text. Thousands separators and
    Unicode minus signs are accepted.

    Returns:
        ``(value, how)`` where ``how`` is ``"answer_tag"``, ``"boxed"``, ``"last_integer"`` or
        ``"none"`` (then ``value`` is ``None``).
    """
    text = text.translate(_MINUS)
    for pattern, how in ((_ANSWER, "answer_tag"), (_BOXED, "boxed"), (_ANY_INT, "last_integer")):
        matches = pattern.findall(text)
        if matches:
            value = _to_int(*matches[-1])
            if value is not None:
                return value, how
    return None, "none"
