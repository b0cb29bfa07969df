"""benchmarks/scaling.py (the team-size study) and its fitting helper ``_bench.power_fit``."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers_bench import run_quick

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "scaling.py"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("_bench")


@pytest.fixture
def scaling(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("scaling")


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


# -- power_fit ----------------------------------------------------------------------------------
def test_power_fit_recovers_an_exact_power_law(bench: ModuleType) -> None:
    per_n = {n: [3.0 * n**2] * 4 for n in (2, 3, 4, 8)}
    fit = bench.power_fit(per_n, rng(), 50)
    assert fit["value"] == pytest.approx(2.0, abs=1e-12)
    assert fit["intercept"] == pytest.approx(math.log(3.0), abs=1e-12)
    assert fit["ci"] == pytest.approx([2.0, 2.0], abs=1e-12)
    assert fit["kept"] == [2, 3, 4, 8] and fit["dropped"] == {} and fit["resamples_used"] == 50


def test_power_fit_ci_covers_the_true_exponent_under_noise(bench: ModuleType) -> None:
    g = np.random.default_rng(1)
    per_n = {n: list(0.5 * n**1.5 * g.lognormal(0.0, 0.2, 30)) for n in (2, 3, 4, 6, 8)}
    fit = bench.power_fit(per_n, rng(), 400)
    lo, hi = fit["ci"]
    assert lo < 1.5 < hi and hi - lo < 0.5
    assert lo <= fit["value"] <= hi


def test_power_fit_on_the_excess_keeps_only_points_clearly_above_the_floor(
    bench: ModuleType,
) -> None:
    # excess: n=2 below its floor, n=3 straddles 0 (at the floor), n=4, 6, 8 clearly above it
    per_n = {2: [1.0, 1.0], 3: [1.5, 1.3], 4: [3.0, 3.2], 6: [5.0, 5.5], 8: [9.0, 9.4]}
    floor = {2: [1.2, 1.4], 3: [1.0, 1.4], 4: [1.0, 1.0], 6: [1.0, 1.0], 8: [1.0, 1.0]}
    fit = bench.power_fit(per_n, rng(), 200, floor)
    assert fit["kept"] == [4, 6, 8]
    assert "<= 0" in fit["dropped"]["2"] and "at the noise floor" in fit["dropped"]["3"]
    assert fit["means"]["4"] == pytest.approx(2.1) and fit["means"]["3"] == pytest.approx(0.2)
    means = [fit["means"][str(n)] for n in (4, 6, 8)]
    assert fit["value"] == pytest.approx(np.polyfit(np.log([4, 6, 8]), np.log(means), 1)[0])
    assert fit["ci"][0] <= fit["value"] <= fit["ci"][1] and fit["resamples_used"] == 200


def test_power_fit_gives_no_ci_when_resamples_cannot_be_fitted(bench: ModuleType) -> None:
    # n = 3's runs straddle 0: many resamples have a non-positive mean there
    fit = bench.power_fit({2: [1.0, 1.2], 3: [2.0, -1.9]}, rng(), 200)
    assert fit["kept"] == [2, 3] and fit["value"] is not None
    assert fit["ci"] is None and 0 < fit["resamples_used"] < 190
    assert fit["note"].startswith("no CI")


def test_power_fit_without_two_positive_points_reports_no_fit(bench: ModuleType) -> None:
    fit = bench.power_fit({2: [0.0, 0.0], 4: [-1.0, 0.5], 8: [1.0, 2.0]}, rng(), 20)
    assert fit["value"] is None and fit["ci"] is None
    assert fit["kept"] == [8] and set(fit["dropped"]) == {"2", "4"}
    assert "no fit" in fit["note"]


def test_power_fit_refuses_unpaired_floors(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"floor\[2\]"):
        bench.power_fit({2: [1.0, 2.0], 3: [1.0]}, rng(), 10, {2: [0.1], 3: [0.1]})


# -- scaling.py pieces --------------------------------------------------------------------------
def test_missing_trainer_keys_become_none_and_dashes(scaling: ModuleType) -> None:
    run = {
        "delta_stale": 0.3,
        "delta_stale_floor": 0.1,
        "exact_delta_stale": 0.05,
        "d_occ": None,
        "d_occ_floor": None,
        "exact_d_occ": 0.2,
    }
    by_n = {
        n: [{k: (v * n if v is not None else None) for k, v in run.items()}] * 3 for n in (2, 4)
    }
    out = scaling.summarise_sampled(by_n, rng(), 20)
    assert out["per_n"]["2"]["d_occ"] is None and out["per_n"]["4"]["d_occ_excess"] is None
    assert out["fits"]["d_occ"] is None and out["fits"]["d_occ_excess"] is None
    assert out["fits"]["exact_d_occ"]["value"] == pytest.approx(1.0)
    assert out["fits"]["delta_stale_excess"]["value"] == pytest.approx(1.0)
    assert out["per_n"]["4"]["delta_stale_excess"]["mean"] == pytest.approx(0.8)
    assert scaling.fmt(None) == "-" and scaling.fmt_fit(None) == "-"


def test_rejects_a_single_team_size(scaling: ModuleType) -> None:
    with pytest.raises(SystemExit):
        scaling.parse_args(["--ns", "4", "4"])


# -- end to end ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_quick_run_writes_fits_with_cis_and_a_plot(tmp_path: Path) -> None:
    out, plot = tmp_path / "scaling.json", tmp_path / "scaling.png"
    data, printed = run_quick(
        "scaling.py", ["--json", str(out), "--plot", str(plot)], out, timeout=300
    )
    for method in ("naive", "teamtr"):
        for q in ("delta_stale", "d_occ"):
            fit = data["exact"][method]["fits"][q]
            assert math.isfinite(fit["value"]) and fit["ci"][0] <= fit["value"] <= fit["ci"][1]
            assert fit["kept"] == [2, 3, 4, 6]
        sampled = data["sampled"][method]["fits"]
        assert (
            math.isfinite(sampled["delta_stale"]["value"])
            and len(sampled["delta_stale"]["ci"]) == 2
        )
        excess = sampled["delta_stale_excess"]
        assert excess["value"] is not None or excess["note"].startswith("no fit")
        assert set(data["sampled"][method]["per_n"]) == {"2", "4"}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Power-law fits" in printed


# -- the coordination task (tiny language models) --------------------------------------------------
def test_pipeline_study_aggregates_runs_over_seeds_and_fits_the_excess(
    scaling: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs whose drift grows like n^2 above a flat floor give alpha = 2 on the excess."""

    def fake_run(args, n, method, seed):
        return {
            "avg_before": 0.2,
            "avg_after": 0.5 + 0.01 * seed,
            "delta_stale": 0.01 * n**2 + 0.1,
            "delta_stale_floor": 0.1,
            "d_occ": 0.02 * n**2 + 0.5,
            "d_occ_floor": 0.5,
        }

    monkeypatch.setattr(scaling, "pipeline_run", fake_run)
    args = scaling.parse_args(
        ["--quick", "--pipeline-ns", "2", "4", "8", "--pipeline-seeds", "0", "1"]
    )
    out = scaling.pipeline_study(args, rng())
    for method in ("naive", "teamtr"):
        fits = out[method]["fits"]
        assert fits["d_occ_excess"]["value"] == pytest.approx(2.0, abs=1e-9)
        assert fits["delta_stale_excess"]["value"] == pytest.approx(2.0, abs=1e-9)
        row = out[method]["per_n"]["4"]
        assert row["avg_after"]["mean"] == pytest.approx(0.505) and row["avg_after"]["n"] == 2
    assert scaling.pipeline_study(scaling.parse_args(["--quick"]), rng()) is None  # off in quick


@pytest.mark.slow
def test_one_pipeline_run_reads_the_trainers_diagnostics(
    scaling: ModuleType, tmp_path: Path
) -> None:
    args = scaling.parse_args(
        [
            "--quick",
            "--pipeline-ns",
            "2",
            "3",
            "--pipeline-stages",
            "1",
            "--pipeline-problems",
            "2",
            "--pipeline-sft-steps",
            "2",
            "--pipeline-out",
            str(tmp_path),
        ]
    )
    row = scaling.pipeline_run(args, 2, "teamtr", 0)
    assert row["d_occ"] is not None and row["d_occ_floor"] is not None
    assert row["delta_stale"] is not None and 0 <= row["avg_before"] <= 1
    assert (tmp_path / "n2-teamtr-seed0" / "summary.json").exists()
    with pytest.raises(SystemExit):
        scaling.parse_args(["--pipeline-ns", "2", "9"])  # a chain has at most 8 steps
    with pytest.raises(SystemExit):
        scaling.parse_args(["--pipeline-start", "1.5"])
    # a per-step error rate that leaves every n's chains right with the same probability
    for n in (2, 5, 8):
        assert (1 - scaling.expert_error_rate(0.3, n)) ** n == pytest.approx(0.3)
