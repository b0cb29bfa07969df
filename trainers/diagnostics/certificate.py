"""Improvement certificate (paper Thm. 3.6 / App. D.2, empirical form Cor. E.10) and its tracking.

Population form (Thm. 3.6, App. D.2)::

    LB = sum_i L_i^seq - c sum_i sqrt(delta_i) - (1/(1-gamma)) sum_i zeta_i,
    c  = sqrt(2) gamma A_max / (1-gamma)^2

Empirical form (App. E.3, Hoeffding + union bound over the n steps at confidence 1 - delta_conf)
additionally subtracts, with ``B = (1+eps_w) A_clip / (1-gamma)``::

    sum_i B sqrt(2 log(2n / delta_conf) / N_i)          # hoeffding_term (minibatch estimation)
    sum_i (A_clip / (1-gamma)) sqrt(2 delta_i)          # ratio_bias_term (ratio clipping, Pinsker)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


def certificate_constant(gamma: float, a_max: float) -> float:
    """``c = sqrt(2) gamma A_max / (1 - gamma)^2`` (Thm. 3.4-3.6)."""
    _check_gamma(gamma)
    if not a_max >= 0:
        raise ValueError(f"a_max must be >= 0 (a bound on |A^pi|); got {a_max}.")
    return math.sqrt(2.0) * gamma * a_max / (1.0 - gamma) ** 2


class Certificate(NamedTuple):
    """Terms of the stage certificate; ``lower_bound = surrogate_sum - every other term``.

    Attributes:
        lower_bound: the certified lower bound on ``J(pi_bar) - J(pi_cur)``.
        surrogate_sum: ``sum_i L_i^seq``.
        kl_term: ``c sum_i sqrt(delta_i)``.
        zeta_term: ``sum_i zeta_i / (1 - gamma)``.
        hoeffding_term: ``sum_i B sqrt(2 log(2n/delta_conf) / N_i)``; 0 unless ``hoeffding``.
        ratio_bias_term: ``sum_i A_clip sqrt(2 delta_i) / (1-gamma)``; 0 unless ``hoeffding``
            and ``ratio_bias``.
    """

    lower_bound: float
    surrogate_sum: float
    kl_term: float
    zeta_term: float
    hoeffding_term: float
    ratio_bias_term: float = 0.0


def _check_gamma(gamma: float) -> None:
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must be in (0, 1); got {gamma}. Use e.g. 0.99.")


def _check_values(name: str, values: Sequence[float], n: int, *, nonneg: bool) -> None:
    if len(values) != n:
        raise ValueError(
            f"{name} must have one entry per update (len(l_seq) = {n}); got {len(values)}."
        )
    for i, v in enumerate(values):
        if math.isnan(v) or (nonneg and not v >= 0):
            hint = " Clamp measured KL estimates (Eq. 18 can dip below 0) with max(d, 0.0)."
            raise ValueError(
                f"{name}[{i}] must be {'>= 0' if nonneg else 'a number'}; got {v}."
                + (hint if name == "deltas" else "")
            )


def _empirical_terms(
    n_samples: Sequence[int] | None,
    deltas: Sequence[float],
    gamma: float,
    a_clip: float | None,
    ratio_bound: float | None,
    confidence: float,
) -> tuple[float, float]:
    """Cor. E.10's ``(hoeffding_term, ratio_bias_term)``; inputs validated here."""
    if n_samples is None or a_clip is None or ratio_bound is None:
        raise ValueError(
            "hoeffding=True needs n_samples (prompt-groups N_i per update), a_clip (A_clip) and "
            f"ratio_bound (1 + eps_w); got n_samples={n_samples}, a_clip={a_clip}, "
            f"ratio_bound={ratio_bound}."
        )
    n = len(deltas)
    _check_values("n_samples", [float(k) for k in n_samples], n, nonneg=True)
    if any(k < 1 for k in n_samples):
        raise ValueError(f"n_samples must all be >= 1; got {list(n_samples)}.")
    if not a_clip > 0:
        raise ValueError(f"a_clip must be > 0; got {a_clip}.")
    if not ratio_bound >= 1:
        raise ValueError(
            f"ratio_bound is 1 + eps_w (the clipped ratio's upper end), so >= 1; got "
            f"{ratio_bound}. Did you pass eps_w? Use 1 + eps_w."
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}. Try 0.95.")
    b = ratio_bound * a_clip / (1.0 - gamma)  # |w_clip A| / (1 - gamma) <= B (E.3 boundedness)
    log_term = 2.0 * math.log(2.0 * max(n, 1) / (1.0 - confidence))  # union bound over n steps
    hoeff = sum(b * math.sqrt(log_term / k) for k in n_samples)
    bias = sum(a_clip / (1.0 - gamma) * math.sqrt(2.0 * d) for d in deltas)
    return hoeff, bias


def certificate_lower_bound(
    l_seq: Sequence[float],
    deltas: Sequence[float],
    zetas: Sequence[float],
    *,
    gamma: float,
    a_max: float,
    hoeffding: bool = False,
    n_samples: Sequence[int] | None = None,
    a_clip: float | None = None,
    ratio_bound: float | None = None,
    confidence: float = 0.95,
    ratio_bias: bool = True,
) -> Certificate:
    """Stage certificate of Thm. 3.6 / D.2, optionally the empirical form of Cor. E.10.

    Args:
        l_seq: ``[n]`` surrogate gains ``L_i^seq`` (as logged; the paper's include ``1/(1-gamma)``).
        deltas: ``[n]`` trust-region radii or measured token KLs, each ``>= 0``.
        zetas: ``[n]`` surrogate-estimation error bounds (or the G.3 proxies), each ``>= 0``.
        gamma: discount in ``(0, 1)``.
        a_max: advantage bound ``A_max``.
        hoeffding: subtract the App. E.3 finite-sample correction.
        n_samples: ``[n]`` numbers ``N_i >= 1`` of independent prompt-groups of step ``i``.
        a_clip: hard advantage clip ``A_clip > 0``.
        ratio_bound: ``1 + eps_w``, the upper end of the clipped ratio (so ``>= 1``).
        confidence: ``1 - delta_conf``, in ``(0, 1)``.
        ratio_bias: include the ratio-clipping bias term; set False when it is already absorbed
            into ``zetas`` (e.g. via ``zeta_ratio``), as E.3 allows.

    Returns:
        :class:`Certificate`.

    Raises:
        ValueError: mismatched lengths, ``gamma`` outside (0, 1), negative or NaN entries, or
            missing/invalid Hoeffding arguments.
    """
    n = len(l_seq)
    c = certificate_constant(gamma, a_max)
    _check_values("l_seq", l_seq, n, nonneg=False)
    _check_values("deltas", deltas, n, nonneg=True)
    _check_values("zetas", zetas, n, nonneg=True)
    surrogate_sum = float(sum(l_seq))
    kl_term = c * sum(math.sqrt(d) for d in deltas)
    zeta_term = sum(zetas) / (1.0 - gamma)
    hoeff = bias = 0.0
    if hoeffding:
        hoeff, bias = _empirical_terms(n_samples, deltas, gamma, a_clip, ratio_bound, confidence)
        bias = bias if ratio_bias else 0.0
    lower = surrogate_sum - kl_term - zeta_term - hoeff - bias
    return Certificate(lower, surrogate_sum, kl_term, zeta_term, hoeff, bias)


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0  # mean of 1-based ranks start+1..end
            start = end
    return ranks


def _paired(x: Sequence[float], y: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.ndim != 1 or xa.shape != ya.shape:
        raise ValueError(
            f"{what} needs two 1-D sequences of equal length; got {xa.shape}, {ya.shape}."
        )
    if np.isnan(xa).any() or np.isnan(ya).any():
        raise ValueError(f"{what} got NaN values; drop the stages where they occur.")
    return xa, ya


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (ties get average ranks): Pearson correlation of the ranks.

    Used for certificate tracking (Sec. 5.6, Fig. 4c): per-stage LB vs measured improvement.
    Returns NaN when either input is constant (correlation undefined).

    Raises:
        ValueError: unequal lengths, fewer than 2 points, or NaN values.
    """
    xa, ya = _paired(x, y, "rank_correlation")
    if len(xa) < 2:
        raise ValueError(f"rank_correlation needs at least 2 points; got {len(xa)}.")
    rx, ry = _average_ranks(xa), _average_ranks(ya)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom > 0 else math.nan


def violation_rate(lower_bounds: Sequence[float], improvements: Sequence[float]) -> float:
    """Fraction of stages whose certificate exceeds the measured improvement (Sec. 5.6).

    Raises:
        ValueError: unequal lengths, no stages, or NaN values.
    """
    lb, imp = _paired(lower_bounds, improvements, "violation_rate")
    if len(lb) == 0:
        raise ValueError("violation_rate needs at least one stage; got none.")
    return float(np.mean(lb > imp))
