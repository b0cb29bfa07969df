"""The gain a comparison reports per learner: after - before over seeds, with a Student-t CI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainers.tools.compare_stats import _T975, BUDGET_KEYS, gain_over_seeds, markdown


def _t_mass(q: float, df: int) -> float:
    """P(|T| <= q) for Student's t with ``df`` degrees of freedom, by the trapezoid rule."""
    x = np.linspace(-q, q, 400_001)
    norm = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    return float(np.trapezoid(norm * (1 + x * x / df) ** (-(df + 1) / 2), x))


@pytest.mark.parametrize("df", range(1, len(_T975) + 1))
def test_each_t_quantile_holds_95_percent_of_its_distribution(df: int) -> None:
    assert _t_mass(_T975[df - 1], df) == pytest.approx(0.95, abs=2e-4)


def test_the_gain_is_the_mean_of_the_seeds_gains_with_a_t_interval() -> None:
    gain = gain_over_seeds([0.5, 0.5, 0.4], [0.8, 0.9, 0.9])
    assert gain["per_seed"] == pytest.approx([0.3, 0.4, 0.5])
    half = 4.303 * 0.1 / math.sqrt(3)
    assert gain["mean"] == pytest.approx(0.4)
    assert gain["ci"] == pytest.approx([0.4 - half, 0.4 + half])


def test_one_seed_gives_its_gain_and_no_interval_and_40_seeds_the_normal_one() -> None:
    one = gain_over_seeds([0.2], [0.5])
    assert one["mean"] == pytest.approx(0.3) and all(math.isnan(v) for v in one["ci"])
    gains = np.linspace(0.0, 0.2, 40)
    many = gain_over_seeds([0.0] * 40, list(gains))
    half = 1.96 * float(np.std(gains, ddof=1)) / math.sqrt(40)
    assert many["ci"] == pytest.approx([0.1 - half, 0.1 + half])
    with pytest.raises(ValueError):
        gain_over_seeds([0.1, 0.2], [0.3])


def test_the_table_shows_each_learners_gain_and_its_interval() -> None:
    row = {"before": [0.5, 0.5, 0.4], "after": [0.8, 0.9, 0.9], "delta_stale": [None]}
    row["gain"] = gain_over_seeds(row["before"], row["after"])
    data = {
        "task": "t",
        "learners": ["a"],
        "seeds": [0, 1, 2],
        "metric": "eval/avg@4",
        "eval_split": "test",
        "reference": "a",
        "results": {"a": {**row, "noise_floor": [None]}},
        "paired": [],
        "budget": {"equal": True, **{k: 1 for k in BUDGET_KEYS}},
    }
    table = markdown(data)
    assert "gain [95% CI]" in table
    assert "| a | 0.467 ± 0.058 | 0.867 ± 0.058 | +0.400 [+0.152, +0.648] |" in table
