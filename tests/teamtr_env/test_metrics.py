"""Tests for teamtr_env.metrics."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teamtr_env import metrics
from teamtr_env.metrics import (
    MetricEstimate,
    ProblemSamples,
    avg_at_k,
    bootstrap_ci,
    maj_at_k,
    majority_answer,
    pass_at_k,
    pass_hat_k,
    summarize,
)

ALL_SMALL = [(n, c, k) for n in range(1, 13) for c in range(n + 1) for k in range(1, n + 1)]


@st.composite
def nck(draw: st.DrawFn, max_n: int = 80) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


# ---------------------------------------------------------------- pass@k


def test_pass_at_k_matches_closed_form_exhaustive() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. no log1p(-1) on the n - c == k - 1 boundary
        for n, c, k in ALL_SMALL:
            expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12, rel=0), (n, c, k)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [(10, 0, 1, 0.0), (10, 10, 5, 1.0), (4, 1, 1, 0.25), (4, 1, 2, 0.5), (5, 3, 3, 1.0)],
)
def test_pass_at_k_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def test_pass_at_k_large_n_is_stable() -> None:
    # abs=0 everywhere: pytest.approx's default abs=1e-12 would swamp these small values.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pass_at_k(10000, 1, 1) == pytest.approx(1e-4, rel=1e-12, abs=0)
        # log-space evaluation keeps relative precision where 1 - prod(1 - k/i) would not
        assert pass_at_k(10**7, 1, 1) == pytest.approx(1e-7, rel=1e-12, abs=0)
        for n, c, k in [(10**6, 3, 2), (10000, 37, 100), (10000, 5000, 100), (10000, 1, 9999)]:
            exact = float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
            assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12, abs=0), (n, c, k)
        assert pass_at_k(10000, 9000, 500) == 1.0  # C(1000,500)/C(10000,500) < 1e-300: no overflow


def test_pass_at_k_accepts_numpy_ints() -> None:
    got = pass_at_k(np.int64(4), np.int64(1), np.int64(2))  # type: ignore[arg-type]
    assert got == pytest.approx(0.5)


@given(nck())
def test_pass_at_k_monotone_in_k_and_c(args: tuple[int, int, int]) -> None:
    n, c, k = args
    p = pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0
    if k < n:
        assert pass_at_k(n, c, k + 1) >= p - 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= p - 1e-12


# ---------------------------------------------------------------- pass^k


def test_pass_hat_k_closed_form_and_bounded_by_pass_at_k() -> None:
    for n, c, k in ALL_SMALL:
        expected = math.comb(c, k) / math.comb(n, k)
        got = pass_hat_k(n, c, k)
        assert got == pytest.approx(expected, abs=1e-12, rel=0), (n, c, k)
        assert got <= pass_at_k(n, c, k) + 1e-12, (n, c, k)


@given(nck(max_n=300))
def test_pass_hat_k_properties(args: tuple[int, int, int]) -> None:
    n, c, k = args
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n, rel=1e-12, abs=1e-15)
    assert pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12
    assert (pass_hat_k(n, c, k) == 0.0) == (c < k)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("fn", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize(
    ("n", "c", "k", "pattern"),
    [
        (3, 1, 5, r"n=3 samples for k=5"),
        (5, 1, 0, r"k=0"),
        (5, -1, 1, r"c=-1"),
        (3, 5, 1, r"c=5 correct of n=3"),
    ],
)
def test_invalid_counts_raise(
    fn: Callable[[int, int, int], float], n: int, c: int, k: int, pattern: str
) -> None:
    with pytest.raises(ValueError, match=pattern):
        fn(n, c, k)


# ---------------------------------------------------------------- avg@k / maj@k


@given(st.lists(st.booleans(), min_size=1, max_size=50))
def test_avg_at_k_equals_pass_at_1(correct: list[bool]) -> None:
    assert avg_at_k(correct) == pytest.approx(pass_at_k(len(correct), sum(correct), 1), abs=1e-12)


def test_avg_at_k_values_and_empty() -> None:
    assert avg_at_k([True, False, False, True]) == 0.5
    with pytest.raises(ValueError, match="got 0"):
        avg_at_k([])


def test_majority_answer() -> None:
    assert majority_answer(["a", "b", "b"]) == "b"
    assert majority_answer([None, None, "c", None]) == "c"
    assert majority_answer(["b", "a", "a", "b"]) == "b"  # tie -> first appearance
    assert majority_answer(["a", "b", "b", "a"]) == "a"
    assert majority_answer([None, None]) is None
    assert majority_answer([]) is None


def test_maj_at_k_cases() -> None:
    # majority correct
    assert maj_at_k(["4", "4", "5"], [True, True, False]) == 1.0
    # majority wrong while a minority is correct
    assert maj_at_k(["4", "5", "5", None], [True, False, False, False]) == 0.0
    # all None, even if a sample was marked correct
    assert maj_at_k([None, None, None], [False, True, False]) == 0.0
    # None never outvotes a real answer
    assert maj_at_k([None, None, "7"], [False, False, True]) == 1.0
    # tie-break by first appearance among tied answers
    assert maj_at_k(["b", "a", "a", "b"], [False, True, True, False]) == 0.0
    assert maj_at_k(["a", "b", "b", "a"], [True, False, False, True]) == 1.0
    # correctness taken from the first sample with the winning answer
    assert maj_at_k(["x", "x"], [True, False]) == 1.0
    assert maj_at_k(["x", "x"], [False, True]) == 0.0


def test_maj_at_k_length_mismatch() -> None:
    with pytest.raises(ValueError, match="got 3 answers and 2 correctness flags"):
        maj_at_k(["a", "b", "c"], [True, False])


# ---------------------------------------------------------------- bootstrap_ci


def test_bootstrap_deterministic_and_seed_dependent() -> None:
    vals = np.random.default_rng(1).random(57)
    a, b = bootstrap_ci(vals, seed=3), bootstrap_ci(list(vals), seed=3)
    assert a == b
    assert bootstrap_ci(vals, seed=4) != a
    assert a.n_problems == 57
    assert a.mean == pytest.approx(float(np.mean(vals)), rel=1e-12)
    assert a.ci_low < a.mean < a.ci_high


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_bootstrap_contains_mean(values: list[float], seed: int) -> None:
    est = bootstrap_ci(values, n_resamples=1000, seed=seed)
    assert min(values) - 1e-12 <= est.ci_low <= est.mean + 1e-12
    assert est.mean - 1e-12 <= est.ci_high <= max(values) + 1e-12


def test_bootstrap_single_problem() -> None:
    assert bootstrap_ci([0.7]) == MetricEstimate(0.7, 0.7, 0.7, 1)


def test_bootstrap_wider_for_higher_confidence() -> None:
    vals = np.random.default_rng(2).random(80)
    narrow, wide = bootstrap_ci(vals, confidence=0.5), bootstrap_ci(vals, confidence=0.99)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


def test_bootstrap_chunking_fills_every_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    vals = np.random.default_rng(5).random(30)
    full = bootstrap_ci(vals, n_resamples=3000, seed=0)
    # 64 // 30 = 2 rows per chunk -> 1500 chunks; an odd resample count leaves a partial chunk.
    monkeypatch.setattr(metrics, "_MAX_INDEX_ELEMENTS", 64)
    chunked = bootstrap_ci(vals, n_resamples=3001, seed=0)
    assert chunked.ci_low == pytest.approx(full.ci_low, abs=0.02)
    assert chunked.ci_high == pytest.approx(full.ci_high, abs=0.02)
    # more problems than the chunk budget -> one resample per chunk still works
    many = bootstrap_ci(np.arange(100.0), n_resamples=201, seed=0)
    assert 30.0 < many.ci_low < many.mean < many.ci_high < 70.0


def test_bootstrap_index_chunks_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    real_rng = np.random.default_rng
    sizes: list[tuple[int, int]] = []

    class SpyRng:
        def __init__(self, seed: int) -> None:
            self._rng = real_rng(seed)

        def integers(self, low: int, high: int, size: tuple[int, int]) -> np.ndarray:
            sizes.append(size)
            return self._rng.integers(low, high, size=size)

    monkeypatch.setattr(metrics, "_MAX_INDEX_ELEMENTS", 100)
    monkeypatch.setattr(np.random, "default_rng", SpyRng)
    bootstrap_ci(np.arange(30.0), n_resamples=100, seed=0)
    assert all(rows * n <= 100 and n == 30 for rows, n in sizes)
    assert sum(rows for rows, _ in sizes) == 100
    assert len(sizes) == 34  # 3 rows per chunk


def test_bootstrap_coverage_simulation() -> None:
    start = time.perf_counter()
    rng = np.random.default_rng(12345)
    covered = 0
    for i in range(200):
        data = (rng.random(100) < 0.3).astype(float)
        est = bootstrap_ci(data, n_resamples=500, seed=i)
        covered += est.ci_low <= 0.3 <= est.ci_high
    assert 0.88 <= covered / 200 <= 0.99, covered
    assert time.perf_counter() - start < 3.0


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"per_problem": []}, "got 0"),
        ({"per_problem": [0.1, 0.2], "confidence": 1.5}, "got 1.5"),
        ({"per_problem": [0.1, 0.2], "confidence": 0.0}, r"got 0\.0"),
        ({"per_problem": [0.1, 0.2], "n_resamples": 0}, "got 0"),
        ({"per_problem": [0.1, float("nan")]}, "got 1 NaN"),
        ({"per_problem": [[0.1], [0.2]]}, r"shape \(2, 1\)"),
    ],
)
def test_bootstrap_invalid(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        bootstrap_ci(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- ProblemSamples / summarize


def _hand_problems() -> list[ProblemSamples]:
    return [
        # c=1; majority "b" (2 votes) is wrong
        ProblemSamples((True, False, False, False), ("a", "b", "b", None)),
        # c=4; majority "x" right
        ProblemSamples((True, True, True, True), ("x", "x", "x", "x")),
        # c=0; no answers
        ProblemSamples((False, False, False, False), (None, None, None, None)),
    ]


def test_problem_samples_validation_and_coercion() -> None:
    with pytest.raises(ValueError, match="got 2 and 3"):
        ProblemSamples((True, False), ("a", "b", "c"))
    with pytest.raises(ValueError, match="got 0"):
        ProblemSamples((), ())
    p = ProblemSamples([1, 0], ["a", None])  # type: ignore[arg-type]
    assert p.correct == (True, False) and p.answers == ("a", None)
    assert hash(p) == hash(ProblemSamples((True, False), ("a", None)))


def test_summarize_hand_example() -> None:
    out = summarize(_hand_problems(), n_resamples=300)
    assert list(out) == ["pass@1", "pass@4", "avg@4", "maj@4"]
    # pass@1 per problem: 1/4, 1, 0; pass@4: 1 (n-c=3<4), 1, 0; maj: 0, 1, 0
    expected = {"pass@1": 1.25 / 3, "pass@4": 2 / 3, "avg@4": 1.25 / 3, "maj@4": 1 / 3}
    for key, value in expected.items():
        est = out[key]
        assert est.mean == pytest.approx(value, abs=1e-12), key
        assert est.n_problems == 3
        assert 0.0 <= est.ci_low <= est.mean <= est.ci_high <= 1.0


def test_summarize_custom_ks_and_pass_hat() -> None:
    out = summarize(_hand_problems(), ks=[2, 1, 2], include_pass_hat=True, n_resamples=300)
    assert list(out) == ["pass@2", "pass@1", "pass^2", "pass^1", "avg@4", "maj@4"]
    # pass@2 for c=1,n=4: 1 - C(3,2)/C(4,2) = 1/2; pass^2: 0, 1, 0
    assert out["pass@2"].mean == pytest.approx((0.5 + 1 + 0) / 3)
    assert out["pass^2"].mean == pytest.approx(1 / 3)
    assert out["pass^1"].mean == pytest.approx(out["pass@1"].mean)


def test_summarize_single_sample_dedupes_default_ks() -> None:
    out = summarize([ProblemSamples((True,), ("a",)), ProblemSamples((False,), ("b",))])
    assert list(out) == ["pass@1", "avg@1", "maj@1"]
    assert out["pass@1"].mean == 0.5


def test_summarize_is_deterministic() -> None:
    assert summarize(_hand_problems(), seed=7) == summarize(_hand_problems(), seed=7)


def test_summarize_errors() -> None:
    unequal = [*_hand_problems(), ProblemSamples((True, False, True), ("a", "a", "b"))]
    with pytest.raises(ValueError, match=r"sample counts \[3, 4\]"):
        summarize(unequal, ks=[1])
    with pytest.raises(ValueError, match=r"k=5 .*n=4"):
        summarize(_hand_problems(), ks=[1, 5])
    with pytest.raises(ValueError, match=r"k=0"):
        summarize(_hand_problems(), ks=[0])
    with pytest.raises(ValueError, match="at least one problem"):
        summarize([])
