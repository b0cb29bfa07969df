"""A tiny, safe arithmetic evaluator for the ``calculate`` tool (never ``eval``).

Grammar (recursive descent, no exponent operator, so no expression can blow up)::

    expr   := term (('+' | '-') term)*
    term   := factor (('*' | '/') factor)*
    factor := ('+' | '-') factor | NUMBER | '(' expr ')'
    NUMBER := digits ['.' digits] | '.' digits

The tool does ASCII arithmetic, like tau-bench's (which accepts only ``0123456789+-*/(). ``):
``digits`` are ``0-9``. Python reads the decimal digits of other scripts too
(``float("١٢٣") == 123.0``); here they are an error that names the character. Whitespace between
tokens (any ``str.isspace`` character) is ignored; any other character outside
``0-9 . + - * / ( )`` is an error.
"""

from __future__ import annotations

import math
import re
import unicodedata

MAX_EXPRESSION_CHARS = 256
MAX_DEPTH = 32
_TOKEN = re.compile(r"\s*(?:([0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})|(.))")


class CalculationError(ValueError):
    """The expression is not plain arithmetic, or its value is not a finite number."""


def _tokens(expression: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if match is None:  # only trailing whitespace is left
            break
        number, other = match.groups()
        if number is not None:
            out.append(number)
        elif other is not None:
            if other.isdecimal():  # a decimal digit of another script (ASCII ones are numbers)
                name = unicodedata.name(other, "a decimal digit")
                raise CalculationError(
                    f"non-ASCII digit {other!r} (U+{ord(other):04X} {name}) in expression: write "
                    "numbers with the ASCII digits 0-9"
                )
            if other not in "+-*/()":
                raise CalculationError(f"invalid character {other!r} in expression")
            out.append(other)
        pos = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise CalculationError("unexpected end of expression")
        self.pos += 1
        return token

    def expr(self, depth: int) -> float:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op, rhs = self.take(), self.term(depth)
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self, depth: int) -> float:
        value = self.factor(depth)
        while self.peek() in ("*", "/"):
            op, rhs = self.take(), self.factor(depth)
            if op == "*":
                value *= rhs
            elif rhs == 0:
                raise CalculationError("division by zero")
            else:
                value /= rhs
        return value

    def factor(self, depth: int) -> float:
        if depth > MAX_DEPTH:
            raise CalculationError(f"expression nested deeper than {MAX_DEPTH}")
        token = self.take()
        if token in ("+", "-"):
            value = self.factor(depth + 1)
            return value if token == "+" else -value
        if token == "(":
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise CalculationError("missing ')'")
            return value
        if token[0] in "0123456789.":
            return float(token)
        raise CalculationError(f"unexpected {token!r}")


def calculate(expression: str) -> float:
    """Evaluates ``+ - * /`` arithmetic with parentheses and unary signs.

    Raises:
        CalculationError: for anything else (names, ``**``, digits other than ASCII ``0-9``,
            unbalanced parentheses, division by zero, overflow, more than
            :data:`MAX_EXPRESSION_CHARS` characters).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens = _tokens(expression)
    if not tokens:
        raise CalculationError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr(0)
    if parser.peek() is not None:
        raise CalculationError(f"unexpected {parser.peek()!r}")
    if not math.isfinite(value):
        raise CalculationError("result is not a finite number")
    return value
