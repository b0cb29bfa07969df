"""Certificate (Thm. 3.6 / D.2, Cor. E.10) and its tracking statistics."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.diagnostics.certificate import (
    Certificate,
    certificate_constant,
    certificate_lower_bound,
    rank_correlation,
    violation_rate,
)


def test_constant_hand_value() -> None:
    assert certificate_constant(0.5, 1.0) == pytest.approx(2 * math.sqrt(2), abs=1e-12)
    assert certificate_constant(0.9, 2.0) == pytest.approx(math.sqrt(2) * 0.9 * 2 / 0.01, rel=1e-12)


def test_population_bound_hand_value() -> None:
    # c = 2 sqrt(2); kl = c (0.1 + 0.2) = 0.6 sqrt(2); zeta = 0.03 / 0.5 = 0.06
    cert = certificate_lower_bound([0.3, 0.2], [0.01, 0.04], [0.01, 0.02], gamma=0.5, a_max=1.0)
    assert isinstance(cert, Certificate)
    assert cert.surrogate_sum == pytest.approx(0.5, abs=1e-15)
    assert cert.kl_term == pytest.approx(0.848528137423857, abs=1e-12)
    assert cert.zeta_term == pytest.approx(0.06, abs=1e-15)
    assert cert.hoeffding_term == 0.0 and cert.ratio_bias_term == 0.0
    assert cert.lower_bound == pytest.approx(-0.408528137423857, abs=1e-12)


HOEFF: dict[str, Any] = {"n_samples": [8, 32], "a_clip": 2.0, "ratio_bound": 1.2, "confidence": 0.9}


def test_hoeffding_bound_hand_value() -> None:
    # B = 1.2 * 2 / 0.5 = 4.8; log term 2 log(2 * 2 / 0.1) = 2 log 40
    # hoeffding = 4.8 (sqrt(2 log 40 / 8) + sqrt(2 log 40 / 32)) = 6.914324097503429
    # ratio bias = (2 / 0.5) (sqrt(0.02) + sqrt(0.08)) = 1.697056274847714
    cert = certificate_lower_bound(
        [0.3, 0.2], [0.01, 0.04], [0.01, 0.02], gamma=0.5, a_max=1.0, hoeffding=True, **HOEFF
    )
    assert cert.hoeffding_term == pytest.approx(6.914324097503429, abs=1e-12)
    assert cert.ratio_bias_term == pytest.approx(1.697056274847714, abs=1e-12)
    assert cert.lower_bound == pytest.approx(
        -0.408528137423857 - 6.914324097503429 - 1.697056274847714, abs=1e-12
    )
    no_bias = certificate_lower_bound(
        [0.3, 0.2],
        [0.01, 0.04],
        [0.01, 0.02],
        gamma=0.5,
        a_max=1.0,
        hoeffding=True,
        ratio_bias=False,
        **HOEFF,
    )
    assert no_bias.ratio_bias_term == 0.0
    assert no_bias.lower_bound == pytest.approx(-0.408528137423857 - 6.914324097503429, abs=1e-12)


def test_empty_stage() -> None:
    cert = certificate_lower_bound(
        [], [], [], gamma=0.9, a_max=1.0, hoeffding=True, n_samples=[], a_clip=1.0, ratio_bound=1.2
    )
    assert cert.lower_bound == 0.0


small = st.floats(0.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1, 1), small, small), min_size=1, max_size=5),
    st.integers(0, 4),
    st.floats(0.0, 0.5),
    st.booleans(),
)
def test_monotone_in_delta_and_zeta(
    steps: list[tuple[float, float, float]], k: int, bump: float, hoeffding: bool
) -> None:
    l_seq, deltas, zetas = (list(x) for x in zip(*steps))
    k %= len(steps)
    kw: dict[str, Any] = {
        "gamma": 0.9,
        "a_max": 2.0,
        "hoeffding": hoeffding,
        "n_samples": [16] * len(steps),
        "a_clip": 5.0,
        "ratio_bound": 1.2,
    }
    base = certificate_lower_bound(l_seq, deltas, zetas, **kw).lower_bound
    more_kl = deltas.copy()
    more_kl[k] += bump
    more_zeta = zetas.copy()
    more_zeta[k] += bump
    assert certificate_lower_bound(l_seq, more_kl, zetas, **kw).lower_bound <= base
    assert certificate_lower_bound(l_seq, deltas, more_zeta, **kw).lower_bound <= base
    assert (
        certificate_lower_bound(l_seq, deltas, zetas, **(kw | {"hoeffding": True})).lower_bound
        <= base
    )


def _evaluate(
    pol: np.ndarray, p: np.ndarray, r: np.ndarray, rho: np.ndarray, g: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Exact J, advantage A[s, a] and discounted occupancy d[s] of a tabular policy."""
    m = np.eye(len(rho)) - g * np.einsum("sa,sat->st", pol, p)
    v = np.linalg.solve(m, (pol * r).sum(1))
    return float(rho @ v), r + g * p @ v - v[:, None], (1 - g) * np.linalg.solve(m.T, rho)


@pytest.mark.parametrize("seed", range(25))
def test_exact_certificate_never_exceeds_true_improvement(seed: int) -> None:
    """Tiny turn-taking MDP (2 agents own alternate states), exact L_seq, delta_i, zeta = 0."""
    rng = np.random.default_rng(seed)
    n_s, n_a, g = 5, 3, 0.5
    p = rng.dirichlet(np.ones(n_s), size=(n_s, n_a))
    r = rng.uniform(-1, 1, (n_s, n_a))
    rho = np.full(n_s, 1 / n_s)
    owner = np.arange(n_s) % 2
    cur = rng.dirichlet(np.ones(n_a), size=n_s)
    logits = np.log(cur) + 0.3 * rng.standard_normal((n_s, n_a))
    tar = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    hats = [cur]
    for agent in (0, 1):  # sequential: pi_hat^i = pi_hat^{i-1} with agent i replaced
        nxt = hats[-1].copy()
        nxt[owner == agent] = tar[owner == agent]
        hats.append(nxt)
    l_seq, deltas, a_max = [], [], 0.0
    for i in (1, 2):
        _, adv, d = _evaluate(hats[i - 1], p, r, rho, g)
        l_seq.append(float(d @ (hats[i] * adv).sum(1)) / (1 - g))
        deltas.append(float(d @ (hats[i - 1] * np.log(hats[i - 1] / hats[i])).sum(1)))
        a_max = max(a_max, float(np.abs(adv).max()))
    improvement = _evaluate(hats[2], p, r, rho, g)[0] - _evaluate(cur, p, r, rho, g)[0]
    cert = certificate_lower_bound(l_seq, deltas, [0.0, 0.0], gamma=g, a_max=a_max)
    assert cert.lower_bound <= improvement


def test_rank_correlation_known_values() -> None:
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert rank_correlation([3, 1, 2], [1, 2, 3]) == pytest.approx(-0.5)  # 1 - 6*6 / (3*8)
    # Ties: ranks x = [1, 2.5, 2.5, 4], y = [1, 2, 3, 4] -> 4.5 / sqrt(4.5 * 5)
    assert rank_correlation([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(
        0.9486832980505138, abs=1e-12
    )
    assert math.isnan(rank_correlation([1, 1, 1], [1, 2, 3]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-100, 100)), min_size=2, max_size=12))
def test_rank_correlation_properties(pairs: list[tuple[int, int]]) -> None:
    x = [float(a) for a, _ in pairs]
    y = [float(b) / 7 for _, b in pairs]
    rho = rank_correlation(x, y)
    if math.isnan(rho):
        assert len(set(x)) == 1 or len(set(y)) == 1
        return
    assert -1 - 1e-12 <= rho <= 1 + 1e-12
    assert rank_correlation([math.exp(v) for v in x], [v**3 - 2 for v in y]) == pytest.approx(
        rho, abs=1e-9
    )
    assert rank_correlation(y, x) == pytest.approx(rho, abs=1e-12)


def test_violation_rate_hand_value() -> None:
    # only stage 2 (0.5 > 0.4) violates; equality is not a violation
    assert violation_rate([0.1, 0.5, -1.0, 0.2], [0.2, 0.4, 0.0, 0.2]) == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"deltas": [0.01]}, r"deltas must have one entry per update \(len\(l_seq\) = 2\); got 1"),
        ({"zetas": [0.0, 0.0, 0.0]}, r"zetas must have one entry per update.*got 3"),
        ({"gamma": 1.0}, r"gamma must be in \(0, 1\); got 1.0"),
        ({"gamma": 0.0}, r"gamma must be in \(0, 1\); got 0.0"),
        ({"a_max": -1.0}, r"a_max must be >= 0.*got -1.0"),
        ({"deltas": [0.01, -0.001]}, r"deltas\[1\] must be >= 0; got -0.001.*max\(d, 0.0\)"),
        ({"zetas": [0.0, -1.0]}, r"zetas\[1\] must be >= 0; got -1.0"),
        ({"l_seq": [math.nan, 0.0]}, r"l_seq\[0\] must be a number; got nan"),
        ({"hoeffding": True}, r"hoeffding=True needs n_samples.*got n_samples=None"),
        (
            {"hoeffding": True, "n_samples": [8, 0], "a_clip": 5.0, "ratio_bound": 1.2},
            r"n_samples must all be >= 1",
        ),
        (
            {"hoeffding": True, "n_samples": [8], "a_clip": 5.0, "ratio_bound": 1.2},
            r"n_samples must have one entry",
        ),
        (
            {"hoeffding": True, "n_samples": [8, 8], "a_clip": 0.0, "ratio_bound": 1.2},
            r"a_clip must be > 0; got 0.0",
        ),
        (
            {"hoeffding": True, "n_samples": [8, 8], "a_clip": 5.0, "ratio_bound": 0.2},
            r"ratio_bound is 1 \+ eps_w.*got 0.2. Did you pass eps_w",
        ),
        (
            {
                "hoeffding": True,
                "n_samples": [8, 8],
                "a_clip": 5.0,
                "ratio_bound": 1.2,
                "confidence": 1.0,
            },
            r"confidence must be in \(0, 1\)",
        ),
    ],
)
def test_certificate_errors(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {
        "l_seq": [0.1, 0.2],
        "deltas": [0.01, 0.01],
        "zetas": [0.0, 0.0],
        "gamma": 0.9,
        "a_max": 1.0,
    }
    with pytest.raises(ValueError, match=match):
        certificate_lower_bound(**(args | kwargs))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: rank_correlation([1, 2], [1, 2, 3]),
            r"rank_correlation needs two 1-D sequences of equal length",
        ),
        (lambda: rank_correlation([1], [1]), r"at least 2 points; got 1"),
        (lambda: rank_correlation([1, math.nan], [1, 2]), r"rank_correlation got NaN"),
        (lambda: violation_rate([], []), r"at least one stage"),
        (
            lambda: violation_rate([1.0], [1.0, 2.0]),
            r"violation_rate needs two 1-D sequences of equal length",
        ),
    ],
)
def test_tracking_errors(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
