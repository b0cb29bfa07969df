"""Diagnostics: stale gap, zeta proxies (G.3), TV / occupancy drift, log-log fits, IS weights."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.diagnostics.estimators import (
    ZetaProxies,
    importance_weight_stats,
    loglog_fit,
    occupancy_drift,
    stale_gap,
    total_variation,
    zeta_proxies,
)
from trainers.optim.advantages import group_advantages

F64 = torch.float64


def test_stale_gap() -> None:
    assert stale_gap(0.3, 0.5) == pytest.approx(0.2)
    assert stale_gap(0.5, 0.3) == pytest.approx(0.2)


UNCLIPPED = torch.tensor([[2.0, -0.5], [6.0, -6.0]], dtype=F64)
CLIPPED = torch.tensor([[2.0, -0.5], [5.0, -5.0]], dtype=F64)
RATIO = torch.tensor([[1.5, 0.9], [1.0, 0.5]], dtype=F64)
CENTRED = torch.tensor([[1.0, -0.25], [3.0, -3.0]], dtype=F64)


def test_zeta_proxies_hand_values() -> None:
    # clip:  |a - A~|           = 0, 0, 1, 1             -> 2 / 4    = 0.5
    # ratio: |A~| |w - clip(w)| = 2*.3, 0, 0, 5*.3       -> 2.1 / 4  = 0.525
    # norm:  |a - c|            = 1, 0.25, 3, 3          -> 7.25 / 4 = 1.8125
    z = zeta_proxies(UNCLIPPED, CLIPPED, RATIO, eps=0.2, centred_adv=CENTRED)
    assert isinstance(z, ZetaProxies)
    assert z.zeta_clip == pytest.approx(0.5, abs=1e-12)
    assert z.zeta_ratio == pytest.approx(0.525, abs=1e-12)
    assert z.zeta_norm == pytest.approx(1.8125, abs=1e-12)
    assert z.zeta_proxy == pytest.approx(2.8375, abs=1e-12)
    assert zeta_proxies(UNCLIPPED, CLIPPED, RATIO).zeta_norm == 0.0


def test_zeta_ratio_with_per_message_ratios() -> None:
    # three messages: |A| |w - clip(w)| = 1 * 0.3, 2 * 0, 4 * 0.5 -> 2.3 / 3
    z = zeta_proxies(
        UNCLIPPED,
        CLIPPED,
        torch.tensor([1.5, 1.1, 0.3]),
        message_adv=torch.tensor([-1.0, 2.0, 4.0]),
    )
    assert z.zeta_ratio == pytest.approx(2.3 / 3, abs=1e-7)
    assert z.zeta_clip == pytest.approx(0.5)


def test_zeta_components_vanish_when_their_source_is_off() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 3.0, 1.0, 1.0]], dtype=F64)
    centred = rewards - rewards.mean(1, keepdim=True)
    no_clip = group_advantages(rewards, a_clip=None)
    ones = torch.ones(2, 4, dtype=F64)
    assert zeta_proxies(no_clip.standardized, no_clip.advantages, ones).zeta_proxy == 0.0
    no_norm = group_advantages(rewards, normalize=False)
    assert (
        zeta_proxies(no_norm.standardized, no_norm.advantages, ones, centred_adv=centred).zeta_norm
        == 0.0
    )
    empty = torch.zeros(0, 4)
    assert zeta_proxies(empty, empty, empty).zeta_proxy == 0.0


def test_total_variation_hand_values() -> None:
    # p = {a: .5, b: .25, c: .25}, q = {a: .25, b: .75} -> (0.25 + 0.5 + 0.25) / 2
    assert total_variation(["a", "a", "b", "c"], ["a", "b", "b", "b"]) == pytest.approx(0.5)
    assert total_variation([1, 2], [2, 1]) == 0.0
    assert total_variation([(0, "x")], [(1, "x")]) == 1.0


def test_occupancy_drift_hand_value() -> None:
    start = ["a", "a", "b", "b"]
    inter = [["a", "a", "b", "b"], ["a", "b", "b", "b"], ["b", "b", "b", "b"]]
    assert occupancy_drift(start, inter) == pytest.approx(0.0 + 0.25 + 0.5)
    assert occupancy_drift(start, []) == 0.0


def test_loglog_fit_recovers_square_law() -> None:
    ns = [2, 3, 4, 5, 6, 8]
    alpha, b = loglog_fit(ns, [0.02 * n**2 for n in ns])
    assert alpha == pytest.approx(2.0, abs=1e-12)
    assert b == pytest.approx(math.log(0.02), abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.floats(-3, 3), st.floats(0.01, 100))
def test_loglog_fit_recovers_power_laws(alpha: float, scale: float) -> None:
    ns = [1.0, 2.0, 3.0, 5.0, 8.0]
    fit_alpha, fit_b = loglog_fit(ns, [scale * n**alpha for n in ns])
    assert fit_alpha == pytest.approx(alpha, abs=1e-9)
    assert fit_b == pytest.approx(math.log(scale), abs=1e-9)


def test_importance_weight_stats_hand_values() -> None:
    # w = [1, 1, 1, 13]: ESS/B = 16^2 / (4 * 172) = 0.372093...; quantiles interpolate 1 -> 13
    stats = importance_weight_stats(torch.log(torch.tensor([1.0, 13.0, 1.0, 1.0])))
    assert stats["ess_over_b"] == pytest.approx(256 / 688, rel=1e-6)
    assert stats["log_ess_over_b"] == pytest.approx(math.log(256 / 688), abs=1e-6)
    assert stats["p95"] == pytest.approx(11.2, rel=1e-6)  # 1 + 0.85 * 12
    assert stats["p99"] == pytest.approx(12.64, rel=1e-6)  # 1 + 0.97 * 12
    assert stats["max"] == pytest.approx(13.0, rel=1e-6)
    assert stats["frac_gt_10"] == 0.25


def test_importance_weight_stats_uniform_and_huge() -> None:
    uniform = importance_weight_stats(torch.full((5,), 3.0))
    assert uniform["ess_over_b"] == pytest.approx(1.0, abs=1e-12)
    assert uniform["frac_gt_10"] == 1.0  # e^3 > 10
    huge = importance_weight_stats(torch.tensor([1000.0, 0.0, 0.0, 0.0]))
    assert huge["ess_over_b"] == pytest.approx(0.25, abs=1e-12)  # one weight dominates: ESS = 1
    assert huge["max"] == math.inf and huge["p99"] == math.inf
    assert not any(math.isnan(v) for v in huge.values())
    one = importance_weight_stats(torch.tensor([0.5]))
    assert one["p95"] == pytest.approx(math.exp(0.5)) and one["ess_over_b"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: zeta_proxies(UNCLIPPED, CLIPPED[:1], RATIO),
            r"clipped_adv must have the shape of unclipped_adv \(2, 2\); got \(1, 2\)",
        ),
        (
            lambda: zeta_proxies(UNCLIPPED, CLIPPED, torch.ones(3)),
            r"ratio must have the shape of clipped_adv.*pass message_adv",
        ),
        (
            lambda: zeta_proxies(UNCLIPPED, CLIPPED, torch.ones(3), message_adv=torch.ones(2)),
            r"ratio must have the shape of message_adv \(2,\)",
        ),
        (
            lambda: zeta_proxies(UNCLIPPED, CLIPPED, RATIO, centred_adv=torch.ones(4)),
            r"centred_adv must have the shape of unclipped_adv",
        ),
        (lambda: zeta_proxies(UNCLIPPED, CLIPPED, RATIO, eps=0.0), r"eps must be > 0.*got 0.0"),
        (lambda: total_variation([], ["a"]), r"non-empty state samples; got 0 and 1"),
        (lambda: occupancy_drift(["a"], [[]]), r"non-empty state samples; got 0 and 1"),
        (lambda: loglog_fit([1, 2], [1.0, 0.0]), r"positive ns and values.*values=\[1.0, 0.0\]"),
        (lambda: loglog_fit([0, 2], [1.0, 2.0]), r"positive ns and values"),
        (lambda: loglog_fit([1, 2, 3], [1.0, 2.0]), r"equal length; got \(3,\), \(2,\)"),
        (lambda: loglog_fit([2], [1.0]), r"at least 2 distinct n"),
        (lambda: loglog_fit([2, 2], [1.0, 3.0]), r"at least 2 distinct n; got ns=\[2.0, 2.0\]"),
        (
            lambda: importance_weight_stats(torch.zeros(2, 2)),
            r"non-empty 1-D \[B\] tensor; got \(2, 2\)",
        ),
        (
            lambda: importance_weight_stats(torch.zeros(0)),
            r"non-empty 1-D \[B\] tensor; got \(0,\)",
        ),
        (lambda: importance_weight_stats(torch.tensor([0.0, math.nan])), r"NaN or \+inf"),
        (lambda: importance_weight_stats(torch.tensor([0.0, math.inf])), r"NaN or \+inf"),
        (lambda: importance_weight_stats(torch.tensor([-math.inf])), r"every weight is 0"),
    ],
)
def test_errors(call: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
