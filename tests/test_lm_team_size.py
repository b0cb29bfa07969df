"""benchmarks/lm_team_size.py: TeamTR and naive sequential on Convention-v0 at several team sizes,
with the stale gap, D_occ by likelihood ratios and fitted exponents."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers_bench import run_quick

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "lm_team_size.py"


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("lm_team_size")


def comparison(n: int, rng: np.random.Generator, seeds: int = 8) -> dict:
    """A compare.json whose naive stale gap grows like n^2 and TeamTR's like n (x 16 stages),
    with noise; the floors are small and constant."""

    def result(power: float) -> dict:
        values = 16 * 0.01 * n**power * (1 + 0.05 * rng.normal(size=seeds))
        return {
            "seeds": list(range(seeds)),
            "before": [0.1] * seeds,
            "after": list(0.3 - 0.01 * power * n + 0.01 * rng.normal(size=seeds)),
            "delta_stale": list(values + 16 * 0.001),
            "noise_floor": [16 * 0.001] * seeds,
            "d_occ_lr": list(values / 2),
            "wall_s": [1.0] * seeds,
        }

    return {
        "results": {"teamtr/TeamTR-v0": result(1.0), "teamtr/NaiveSequential-v0": result(2.0)},
        "paired": [{"learner": "teamtr/NaiveSequential-v0", "mean": -0.01, "ci": [-0.02, 0.0]}],
        "budget": {},
    }


def test_the_exponents_and_their_gap_come_out_of_the_per_run_values(sweep: ModuleType) -> None:
    rng = np.random.default_rng(0)
    data = {n: comparison(n, rng) for n in (2, 3, 4, 6)}
    result = sweep.summarise(data, stages=16, resamples=400)
    for q in ("delta_stale", "d_occ_lr"):
        naive, teamtr = result["fits"]["naive"][q], result["fits"]["teamtr"][q]
        assert naive["value"] == pytest.approx(2.0, abs=0.1)
        assert teamtr["value"] == pytest.approx(1.0, abs=0.1)
        assert naive["ci"][0] < 2.0 < naive["ci"][1] or abs(naive["value"] - 2) < 0.05
        gap = result["exponent_gap"][q]
        assert gap["value"] == pytest.approx(1.0, abs=0.15) and gap["ci"][0] > 0.5
    # the cells are per stage: 0.01 n^p (+ the floor for the stale gap)
    cell = result["per_n"]["2"]["naive"]
    assert np.mean(cell["noise_floor"]) == pytest.approx(0.001)
    assert np.mean(cell["d_occ_lr"]) == pytest.approx(0.02, rel=0.1)
    table = sweep.markdown(result)
    assert "naive - TeamTR" in table and "-0.010 [-0.020, +0.000]" in table
    # after = 0.3 - 0.01 p n: naive (p = 2) loses 0.01 more than TeamTR per added agent
    trend = result["difference_trend"]
    assert trend["slope_per_agent"] == pytest.approx(-0.01, abs=0.003)
    assert trend["ci"][0] < -0.01 < trend["ci"][1] and trend["ci"][1] < 0
    assert "per added agent" in table


def test_no_trend_when_naive_keeps_pace(sweep: ModuleType) -> None:
    rng = np.random.default_rng(1)
    per_n = {
        str(n): {
            learner: {"after": list(0.5 - 0.02 * n + 0.01 * rng.normal(size=8))}
            for learner in ("naive", "teamtr")
        }
        for n in (2, 3, 4, 6)
    }
    trend = sweep.difference_trend(per_n, 500, 0)
    assert trend["ci"][0] < 0 < trend["ci"][1]


def test_no_exponent_gap_when_a_mean_is_not_positive(sweep: ModuleType) -> None:
    ones = {2: np.array([0.1, 0.2]), 3: np.array([-0.3, -0.1])}
    assert sweep.exponent_gap(ones, ones, 100, 0) is None


def test_team_overrides_clone_a_miscoordinated_team_of_n(sweep: ModuleType) -> None:
    (line,) = sweep.team_overrides(4)
    options = json.loads(line.split("=", 1)[1])
    assert options["agents"] == ["a1", "a2", "a3", "a4"]
    assert options["expert_transforms"] == {"a1": "reverse"}


@pytest.mark.slow
def test_the_quick_sweep_runs_and_logs_both_diagnostics(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    args = ["--out", str(out), "--bootstrap", "200"]
    result, _ = run_quick("lm_team_size.py", args, out / "lm_team_size.json", timeout=1500)
    assert result["ns"] == [2, 3] and result["seeds"] == [0, 1] and result["wall_s"] > 0
    for n in ("2", "3"):
        for learner in ("teamtr", "naive"):
            cell = result["per_n"][n][learner]
            assert len(cell["after"]) == 2
            assert all(v is not None and v >= 0 for v in cell["d_occ_lr"])
            assert all(v is not None for v in cell["delta_stale"])
    # the quick clone (two-letter secrets) lets the updates move the team: the drift is seen
    assert max(v for n in ("2", "3") for v in result["per_n"][n]["naive"]["d_occ_lr"]) > 0
    assert set(result["fits"]["naive"]) == {"delta_stale", "d_occ_lr"}
    assert result["fits"]["teamtr"]["d_occ_lr"]["value"] is not None
    assert (out / "lm_team_size.png").stat().st_size > 0
    assert "Exponents" in (out / "lm_team_size.md").read_text()
