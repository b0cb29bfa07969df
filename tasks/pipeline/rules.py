"""Pure rules of the pipeline task: chains of small additions and subtractions, done one step per
agent.

A chain is a start value and a list of operations, rendered ``"7 +5 -3 +8"``. One *step* applies the
first operation and passes the rest on: ``"7 +5 -3 +8"`` -> ``"12 -3 +8"``; the last step gives the
answer: ``"9 +8"`` -> ``"Answer: 17"``. Nothing here evaluates text as code: chains are read with one
bounded regular expression and ``int()`` on short digit strings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

MAX_STEPS = 8
# The scripted expert's mistakes (see PipelineTask): a wrong value, or a message without the rest.
ExpertError = Literal["arithmetic", "drop_rest"]
# A chain: an integer, then up to MAX_STEPS signed one- or two-digit operations, space-separated.
_CHAIN = re.compile(
    r"^[ \t]{0,3}(-?\d{1,4})((?:[ \t]{1,3}[+-]\d{1,2}){0," + str(MAX_STEPS) + r"})[ \t]{0,3}$"
)
_OP = re.compile(r"([+-])(\d{1,2})")


def generate(
    rng: np.random.Generator, steps: int, max_operand: int, max_value: int
) -> tuple[int, list[int]]:
    """A start digit and ``steps`` signed operations in ``[-max_operand, max_operand] \\ {0}`` whose
    running value stays in ``[0, max_value]`` (so every intermediate result is a small non-negative
    integer)."""
    start = int(rng.integers(0, 10))
    value, ops = start, []
    for _ in range(steps):
        choices = [
            d
            for d in range(-max_operand, max_operand + 1)
            if d != 0 and 0 <= value + d <= max_value
        ]
        d = int(rng.choice(choices))
        ops.append(d)
        value += d
    return start, ops


def render(value: int, ops: Sequence[int]) -> str:
    """``7, [5, -3]`` -> ``"7 +5 -3"``."""
    return " ".join([str(value), *(f"{d:+d}" for d in ops)])


def result(value: int, ops: Sequence[int]) -> int:
    """The chain's exact value."""
    return value + sum(ops)


def parse_chain(text: str) -> tuple[int, list[int]] | None:
    """``"12 -3 +8"`` -> ``(12, [-3, 8])``; ``None`` when ``text`` is not a chain line."""
    match = _CHAIN.match(text)
    if match is None:
        return None
    ops = [int(d) if sign == "+" else -int(d) for sign, d in _OP.findall(match.group(2))]
    return int(match.group(1)), ops


def last_chain(context: str) -> tuple[int, list[int]] | None:
    """The last line of ``context`` that is a chain with at least one operation left."""
    for line in reversed(context.split("\n")):
        parsed = parse_chain(line)
        if parsed is not None and parsed[1]:
            return parsed
    return None


def step(value: int, ops: Sequence[int], error: int = 0, *, drop_rest: bool = False) -> str:
    """One agent's message: apply the first operation (plus ``error``) and pass the rest on, or
    give the answer when no operation is left after it. ``drop_rest`` writes the new value alone
    (no rest of the chain, no ``Answer:`` tag): a message the next reader cannot use."""
    new = value + ops[0] + error
    rest = list(ops[1:])
    if drop_rest:
        return str(new)
    return render(new, rest) if rest else f"Answer: {new}"
