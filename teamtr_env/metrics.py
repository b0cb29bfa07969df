"""Sampling metrics for multi-sample evaluation: pass@k, pass^k, avg@k, maj@k.

Pure functions (numpy only, no I/O). Per-problem estimators take the n samples
drawn for one problem; dataset-level numbers are the plain mean of per-problem
values with a percentile-bootstrap CI over problems (:func:`bootstrap_ci`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Max resampled indices held at once by bootstrap_ci (int64 idx + float64 gather ~ 32 MiB).
_MAX_INDEX_ELEMENTS = 1 << 21


def _check_counts(n: int, c: int, k: int) -> tuple[int, int, int]:
    """Validates (n, c, k) for pass@k / pass^k; returns them as Python ints."""
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if k < 1:
        raise ValueError(f"expected k >= 1, got k={k}; fix: use a positive attempt budget")
    if c < 0:
        raise ValueError(f"expected c >= 0 correct samples, got c={c}; fix: pass a count >= 0")
    if c > n:
        raise ValueError(f"expected c <= n, got c={c} correct of n={n} samples; fix: check c")
    if n < k:
        raise ValueError(f"expected n >= k, got n={n} samples for k={k}; fix: lower k")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al., 2021) for one problem.

    ``pass@k = 1 - C(n-c, k) / C(n, k)`` (1.0 when ``n - c < k``), computed in
    the stable product form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, evaluated in
    log space as ``-expm1(sum(log1p(-k/i)))`` so tiny values keep precision.

    Args:
        n: Samples drawn for the problem.
        c: Correct samples, ``0 <= c <= n``.
        k: Attempt budget, ``1 <= k <= n``.

    Returns:
        P(at least one of k samples drawn without replacement is correct), in [0, 1].

    Raises:
        ValueError: If ``k < 1``, ``c < 0``, ``c > n`` or ``n < k``.
    """
    n, c, k = _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)  # shape (c,); every i > k here
    return float(-np.expm1(np.sum(np.log1p(-k / i))))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of tau-bench for one task: probability that k samples all succeed.

    ``pass^k = C(c, k) / C(n, k)`` (0 when ``c < k``), computed as the stable
    product ``prod_{i=0}^{k-1} (c - i) / (n - i)``; ``pass^1 == c / n``.

    Args:
        n: Samples drawn for the task.
        c: Correct samples, ``0 <= c <= n``.
        k: Trials that must all succeed, ``1 <= k <= n``.

    Returns:
        P(k samples drawn without replacement are all correct), in [0, 1].

    Raises:
        ValueError: If ``k < 1``, ``c < 0``, ``c > n`` or ``n < k``.
    """
    n, c, k = _check_counts(n, c, k)
    if c < k:
        return 0.0
    i = np.arange(k, dtype=np.float64)  # shape (k,)
    return float(np.prod((c - i) / (n - i)))


def avg_at_k(correct: Sequence[bool]) -> float:
    """avg@k: mean correctness ``c / k`` of exactly the k samples of one problem.

    Args:
        correct: Correctness flag per sample, length k >= 1.

    Returns:
        Fraction correct in [0, 1]; equals ``pass_at_k(k, c, 1)``.

    Raises:
        ValueError: If ``correct`` is empty.
    """
    if len(correct) == 0:
        raise ValueError("expected at least one sample, got 0; fix: pass every sample's flag")
    return sum(bool(x) for x in correct) / len(correct)


def majority_answer(answers: Sequence[str | None]) -> str | None:
    """Most common non-None answer; a tie goes to the tied answer that appears first.

    Args:
        answers: Extracted answer per sample; None (no answer) does not vote.

    Returns:
        The winning answer, or None if no answer is non-None.
    """
    counts: dict[str, int] = {}  # insertion order == order of first appearance
    for a in answers:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    best: str | None = None
    for a, cnt in counts.items():  # strict '>' keeps the earliest among ties
        if best is None or cnt > counts[best]:
            best = a
    return best


def maj_at_k(answers: Sequence[str | None], correct: Sequence[bool]) -> float:
    """maj@k: correctness of the majority-vote answer of one problem.

    The winner is :func:`majority_answer` (None ignored; ties broken by first
    appearance in ``answers``); its correctness is that of the first sample
    carrying the winning answer.

    Args:
        answers: Extracted answer per sample (None if extraction failed), length k.
        correct: Correctness flag per sample, length k.

    Returns:
        1.0 if the majority answer is correct, else 0.0 (0.0 if all answers are None).

    Raises:
        ValueError: If the two sequences differ in length.
    """
    if len(answers) != len(correct):
        raise ValueError(
            f"expected answers and correct of equal length, got {len(answers)} answers and "
            f"{len(correct)} correctness flags; fix: pass one entry per sample in both"
        )
    winner = majority_answer(answers)
    if winner is None:
        return 0.0
    return 1.0 if bool(correct[list(answers).index(winner)]) else 0.0


@dataclass(frozen=True)
class MetricEstimate:
    """Dataset-level metric: plain mean over ``n_problems`` with CI [ci_low, ci_high]."""

    mean: float
    ci_low: float
    ci_high: float
    n_problems: int


def bootstrap(
    stat: Callable[[list[np.ndarray]], Any],
    sizes: Sequence[int],
    *,
    resamples: int,
    rng: np.random.Generator,
    batched: bool = False,
) -> np.ndarray:
    """The one bootstrap of the project: ``stat`` on ``resamples`` resamples of groups of
    ``sizes`` items, each resample drawing every group's ``size`` indices with replacement (in
    group order, from ``rng``; a paired bootstrap passes one group per unit resampled alike).

    Args:
        stat: the statistic of one resample, given each group's index array (``[size]``); it
            may draw more from ``rng`` (a nested bootstrap) and return ``None`` to leave a
            resample out. With ``batched``, it is given index matrices ``[chunk, size]`` of
            several resamples at once (in row chunks of at most ``_MAX_INDEX_ELEMENTS``
            indices, the same draws as one at a time) and returns their statistics ``[chunk]``.
        sizes: each group's number of items.
        resamples: how many resamples.
        rng: the generator the draws come from.

    Returns:
        The statistics of the resamples kept, ``[kept]`` (float64).
    """
    if not batched:
        kept = []
        for _ in range(resamples):
            value = stat([rng.integers(0, size, size) for size in sizes])
            if value is not None:
                kept.append(float(value))
        return np.asarray(kept, dtype=np.float64)
    out = np.empty(resamples, dtype=np.float64)
    rows = max(1, _MAX_INDEX_ELEMENTS // max(1, sum(sizes)))
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        out[start:stop] = stat([rng.integers(0, s, size=(stop - start, s)) for s in sizes])
    return out


def percentile_interval(
    draws: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> tuple[float, float]:
    """The ``(1 -/+ confidence) / 2`` quantiles of bootstrap ``draws``: the percentile
    interval."""
    alpha = round((1.0 - confidence) / 2.0, 12)  # 0.95 gives 0.025 exactly, not 0.025000...02
    low, high = np.quantile(np.asarray(draws, dtype=np.float64), [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(
    per_problem: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> MetricEstimate:
    """Percentile-bootstrap CI of the mean over problems.

    Resamples problems with replacement: index matrix of shape
    ``(n_resamples, n_problems)``, drawn in row chunks of at most
    ``_MAX_INDEX_ELEMENTS`` indices to bound memory; the bounds are the
    ``(1 -/+ confidence) / 2`` quantiles of the row means. Deterministic per
    ``seed``. One problem gives ``ci_low == ci_high == mean``. The percentile
    interval usually, but not provably always, contains ``mean``.

    Args:
        per_problem: Finite per-problem values, shape (n_problems,), n_problems >= 1.
        confidence: Coverage level in (0, 1).
        n_resamples: Bootstrap resamples, >= 1.
        seed: Seed for ``numpy.random.default_rng``.

    Returns:
        MetricEstimate with the plain mean and the CI bounds.

    Raises:
        ValueError: On empty, non-1-D or non-finite input, confidence outside
            (0, 1), or ``n_resamples < 1``.
    """
    values = np.asarray(per_problem, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"expected 1-D per-problem values, got shape {values.shape}")
    n = values.shape[0]
    if n == 0:
        raise ValueError("expected at least one per-problem value, got 0")
    if not np.all(np.isfinite(values)):
        bad = int(np.sum(~np.isfinite(values)))
        raise ValueError(f"expected finite per-problem values, got {bad} NaN/inf value(s)")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"expected confidence in (0, 1), got {confidence}; fix: e.g. 0.95")
    if n_resamples < 1:
        raise ValueError(f"expected n_resamples >= 1, got {n_resamples}")
    mean = float(values.mean())
    if n == 1:
        return MetricEstimate(mean=mean, ci_low=mean, ci_high=mean, n_problems=1)
    rng = np.random.default_rng(seed)
    means = bootstrap(  # each resample's mean, [n_resamples]
        lambda idx: values[idx[0]].mean(axis=1), [n], resamples=n_resamples, rng=rng, batched=True
    )
    low, high = percentile_interval(means, confidence)
    return MetricEstimate(mean=mean, ci_low=low, ci_high=high, n_problems=n)


@dataclass(frozen=True)
class ProblemSamples:
    """The K >= 1 samples of one problem: ``correct[j]`` and ``answers[j]`` per sample."""

    correct: tuple[bool, ...]
    answers: tuple[str | None, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "correct", tuple(bool(x) for x in self.correct))
        object.__setattr__(self, "answers", tuple(self.answers))
        if len(self.correct) != len(self.answers):
            raise ValueError(
                f"expected correct and answers of equal length, got {len(self.correct)} and "
                f"{len(self.answers)}; fix: give one entry per sample in both"
            )
        if len(self.correct) == 0:
            raise ValueError("expected at least one sample per problem, got 0")


def summarize(
    problems: Sequence[ProblemSamples],
    *,
    ks: Sequence[int] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    include_pass_hat: bool = False,
) -> dict[str, MetricEstimate]:
    """Dataset-level pass@k, avg@K, maj@K (optionally pass^k), each with a bootstrap CI.

    Keys, in order: ``pass@{k}`` per k, ``pass^{k}`` per k (if
    ``include_pass_hat``), ``avg@{K}``, ``maj@{K}``, where K is the common
    number of samples per problem. Values are :func:`bootstrap_ci` of the
    per-problem values (same ``confidence``/``n_resamples``/``seed`` for all).

    Args:
        problems: One ProblemSamples per problem, all with the same K samples.
        ks: Budgets for pass@k / pass^k; default ``[1, K]`` deduplicated.
        confidence: CI level in (0, 1), passed to :func:`bootstrap_ci`.
        n_resamples: Bootstrap resamples, passed to :func:`bootstrap_ci`.
        seed: Bootstrap seed, the same for every metric.
        include_pass_hat: Also report pass^k for each k.

    Returns:
        Mapping metric name -> MetricEstimate.

    Raises:
        ValueError: If ``problems`` is empty, a k is < 1 or exceeds the smallest
            sample count, or problems have different sample counts.
    """
    if len(problems) == 0:
        raise ValueError("expected at least one problem, got 0")
    counts = [len(p.correct) for p in problems]
    min_n = min(counts)
    k_list = list(dict.fromkeys([1, min_n] if ks is None else [operator.index(k) for k in ks]))
    for k in k_list:
        if k < 1 or k > min_n:
            raise ValueError(
                f"expected 1 <= k <= n for every problem, got k={k} with smallest sample count "
                f"n={min_n} (problem index {counts.index(min_n)}); fix: lower k or draw more"
            )
    if len(set(counts)) > 1:
        raise ValueError(
            "expected the same number of samples for every problem (needed for avg@K/maj@K), "
            f"got sample counts {sorted(set(counts))}; fix: draw K samples for every problem"
        )
    n_samples = counts[0]
    n_correct = [sum(p.correct) for p in problems]

    def agg(values: Sequence[float]) -> MetricEstimate:
        return bootstrap_ci(values, confidence=confidence, n_resamples=n_resamples, seed=seed)

    out: dict[str, MetricEstimate] = {}
    for k in k_list:
        out[f"pass@{k}"] = agg([pass_at_k(n_samples, c, k) for c in n_correct])
    if include_pass_hat:
        for k in k_list:
            out[f"pass^{k}"] = agg([pass_hat_k(n_samples, c, k) for c in n_correct])
    out[f"avg@{n_samples}"] = agg([avg_at_k(p.correct) for p in problems])
    out[f"maj@{n_samples}"] = agg([maj_at_k(p.answers, p.correct) for p in problems])
    return out
