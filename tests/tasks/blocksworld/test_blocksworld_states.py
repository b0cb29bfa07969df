"""Uniform random Blocksworld states: exact counts, the unranking bijection, and the sampled
distribution on 3 blocks (13 states)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from tasks.blocksworld import states
from tasks.blocksworld.domain import TABLE, below_from_facts, facts_from_below

# OEIS A000262 (sets of lists = blocks-world states): 1, 1, 3, 13, 73, 501, 4051, 37633, 394353.
KNOWN_COUNTS = [1, 1, 3, 13, 73, 501, 4051, 37633, 394353, 4596553, 58941091]
CHI2_999_DOF12 = 32.909  # chi-square critical value, 12 degrees of freedom, p = 0.001


def lah_total(n: int) -> int:
    """Sum over k of the Lah numbers L(n, k) = C(n-1, k-1) n! / k!: n blocks in k towers."""
    if n == 0:
        return 1
    return sum(
        math.comb(n - 1, k - 1) * math.factorial(n) // math.factorial(k) for k in range(1, n + 1)
    )


def chi_square(counts: Counter, cells: int, draws: int) -> float:
    expected = draws / cells
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in range(cells))


def test_counts_match_known_sequence_and_lah_sum() -> None:
    assert [states.count_states(n) for n in range(len(KNOWN_COUNTS))] == KNOWN_COUNTS
    for n in range(13):
        assert states.count_states(n) == lah_total(n)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_unranking_is_a_bijection_onto_all_states(n: int) -> None:
    decoded = [states.unrank_state(n, r) for r in range(states.count_states(n))]
    assert len(set(decoded)) == len(decoded)
    assert set(decoded) == set(states.brute_force_states(n))


def test_unranked_states_are_consistent_blocksworld_states() -> None:
    names = tuple("abcdef")
    for r in range(0, states.count_states(6), 7):
        below = states.unrank_state(6, r)
        assert below_from_facts(names, facts_from_below(names, below)) == below


def test_rank_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"rank must be in \[0, 13\)"):
        states.unrank_state(3, 13)
    with pytest.raises(ValueError, match="n must be in 1..12"):
        states.sample_state(13, np.random.default_rng(0))


def test_three_block_states_are_sampled_uniformly() -> None:
    all_states = sorted(states.brute_force_states(3))
    assert len(all_states) == 13
    index = {s: i for i, s in enumerate(all_states)}
    rng = np.random.default_rng(2024)
    draws = 13_000
    counts = Counter(index[states.sample_state(3, rng)] for _ in range(draws))
    assert set(counts) == set(range(13))
    assert chi_square(counts, 13, draws) < CHI2_999_DOF12
    assert max(abs(c - 1000) for c in counts.values()) < 130  # about 4 standard deviations


def naive_state(n: int, rng: np.random.Generator) -> tuple[int, ...]:
    """A plausible but biased sampler: each block in turn goes on the table or on a random clear
    block, with equal probability for every option."""
    below = [TABLE] * n
    for i in range(1, n):
        clear = [j for j in range(i) if j not in below[:i]]
        options = [TABLE, *clear]
        below[i] = options[int(rng.integers(len(options)))]
    return tuple(below)


def test_the_chi_square_check_detects_a_biased_sampler() -> None:
    all_states = sorted(states.brute_force_states(3))
    rng = np.random.default_rng(2024)
    counts = Counter(all_states.index(naive_state(3, rng)) for _ in range(13_000))
    assert chi_square(counts, 13, 13_000) > 10 * CHI2_999_DOF12


def test_sampling_is_deterministic_given_the_seed() -> None:
    a = [states.sample_state(8, np.random.default_rng(7)) for _ in range(3)]
    b = [states.sample_state(8, np.random.default_rng(7)) for _ in range(3)]
    assert a == b
