"""Uniformly random Blocksworld states by exact counting (Slaney & Thiébaux's ``bwstates``).

A state of ``n`` labelled blocks is a set of towers (hand empty). Slaney & Thiébaux ("Blocks World
revisited", AIJ 2001; the ``bwstates`` program PlanBench ships) build a state by starting from
``n`` one-block *floating* towers and repeatedly taking the last floating tower and putting it
either on the table (it becomes a *grounded* tower) or on top of one of the other towers, floating
or grounded. Let ``g(n, k)`` be the number of complete states that extend a part-state with ``n``
floating and ``k`` grounded towers. Then::

    g(0, k) = 1
    g(n, k) = g(n - 1, k + 1) + (n - 1 + k) * g(n - 1, k)

(the last floating tower goes on the table, or on one of the ``n - 1 + k`` other towers), and the
number of states of ``n`` blocks is ``g(n, 0)`` (1, 3, 13, 73, 501, 4051, 37633, 394353, ... the
sum of Lah numbers). ``bwstates`` draws each placement with probabilities proportional to these
counts (floating-point ratios). Here the same recursion is used as an exact *unranking*: an integer
``r`` drawn uniformly from ``[0, g(n, 0))`` is decoded step by step (``r < g(n-1, k+1)``: table;
otherwise the destination is ``(r - g(n-1, k+1)) // g(n-1, k)`` and the remainder is carried on).
The decoding is a bijection between ``[0, g(n, 0))`` and the states (the tests enumerate it against
a brute-force list of states), so every state has probability exactly ``1 / g(n, 0)``, with integer
arithmetic only.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

from tasks.blocksworld.domain import TABLE

MAX_BLOCKS = 12
"""The most blocks a state may have (PlanBench names twelve block colours)."""


@cache
def extensions(n: int, k: int) -> int:
    """``g(n, k)``: complete states extending ``n`` floating and ``k`` grounded towers."""
    if n == 0:
        return 1
    return extensions(n - 1, k + 1) + (n - 1 + k) * extensions(n - 1, k)


def count_states(n: int) -> int:
    """The number of Blocksworld states of ``n`` labelled blocks with the hand empty."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return extensions(n, 0)


def unrank_state(n: int, rank: int) -> tuple[int, ...]:
    """The state number ``rank`` (``0 <= rank < count_states(n)``) as ``below`` indices.

    ``below[i]`` is the block that block ``i`` sits on, or :data:`~tasks.blocksworld.domain.TABLE`.

    Raises:
        ValueError: ``rank`` out of range.
    """
    total = count_states(n)
    if not 0 <= rank < total:
        raise ValueError(f"rank must be in [0, {total}), got {rank}")
    below = [TABLE] * n
    # Each tower is (top, bottom); floating towers start as the single blocks 0..n-1.
    floating = [(i, i) for i in range(n)]
    grounded: list[tuple[int, int]] = []
    while floating:
        top, bottom = floating.pop()
        m, k = len(floating) + 1, len(grounded)
        on_table = extensions(m - 1, k + 1)
        if rank < on_table:
            grounded.append((top, bottom))
            continue
        dest, rank = divmod(rank - on_table, extensions(m - 1, k))
        towers = grounded if dest < k else floating
        j = dest if dest < k else dest - k
        below[bottom] = towers[j][0]  # the moved tower's bottom sits on the destination's top
        towers[j] = (top, towers[j][1])
    return tuple(below)


def sample_state(n: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A uniformly random state of ``n`` blocks (``1 <= n <= MAX_BLOCKS``), as ``below`` indices."""
    if not 1 <= n <= MAX_BLOCKS:
        raise ValueError(f"n must be in 1..{MAX_BLOCKS}, got {n}")
    return unrank_state(n, int(rng.integers(0, count_states(n))))


def brute_force_states(n: int) -> list[tuple[int, ...]]:
    """Every state of ``n`` blocks by filtering all support assignments (a slow reference for
    tests: at most one block on each block, no cycles)."""
    states = []
    for below in itertools.product(range(-1, n), repeat=n):
        if any(below[i] == i for i in range(n)):
            continue
        supports = [b for b in below if b >= 0]
        if len(supports) != len(set(supports)):
            continue
        if all(_grounded(below, i) for i in range(n)):
            states.append(tuple(below))
    return states


def _grounded(below: tuple[int, ...], i: int) -> bool:
    for _ in range(len(below) + 1):
        if below[i] == TABLE:
            return True
        i = below[i]
    return False
