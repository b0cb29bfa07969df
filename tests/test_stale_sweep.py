"""benchmarks/stale_sweep.py: the stale-stress sweep over (n, delta, R) on the exact relay."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from trainers.exact.games import RelayGame, expected_return, random_logits, tables

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "stale_sweep.py"
TINY = ["--ns", "2", "3", "--deltas", "0.1", "1.0", "--rounds", "1", "2"]
TINY += ["--inits", "3", "--stages", "2", "--bootstrap", "200"]


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("stale_sweep")


def check_cell(cell: dict[str, Any]) -> None:
    for key in ("margin", "auc_margin"):
        lo, hi = cell[key]["ci"]
        assert lo <= cell[key]["mean"] <= hi
    assert set(cell["j_final"]) == {"teamtr", "naive"}
    assert cell["seconds"] >= 0 and cell["inits"] >= 2
    # both learners start every initialisation from the same team and make the same first update
    assert cell["paired_start"] == {"j_init_max_abs_diff": 0.0, "first_update_max_abs_diff": 0.0}
    # TeamTR's line search measures the exact KL under the team it updates: always in region
    assert cell["trust_region"]["teamtr"]["out_of_region_rate"] == 0.0


def test_tiny_grid_writes_the_json_table_and_plot(
    sweep: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot = tmp_path / "sweep.json", tmp_path / "sweep.png"
    assert sweep.main([*TINY, "--json", str(out), "--plot", str(plot)]) == 0
    data = json.loads(out.read_text())
    grid = data["grid"]
    assert len(grid) == 8
    assert {(c["n"], c["delta"], c["rounds"]) for c in grid} == {
        (n, d, r) for n in (2, 3) for d in (0.1, 1.0) for r in (1, 2)
    }
    for cell in grid:
        check_cell(cell)
        assert cell["inits"] == 3 and "per_init" not in cell
        assert len(cell["j_curve"]["teamtr"]) == 3  # J_0 and after each of the 2 stages
        tr, nv = cell["j_curve"]["teamtr"], cell["j_curve"]["naive"]
        assert cell["margin"]["mean"] == pytest.approx(tr[-1] - nv[-1], abs=1e-12)
        auc = np.mean(tr[1:]) - np.mean(nv[1:])
        assert cell["auc_margin"]["mean"] == pytest.approx(auc, abs=1e-12)
    best = data["best"]
    assert {"n", "delta", "rounds"} <= set(best)
    assert len(best["margin"]["ci"]) == 2 and isinstance(best["margin"]["mean"], float)
    assert best == sweep.best_cell(grid)
    assert max(c["margin"]["ci"][0] for c in grid) == best["margin"]["ci"][0]
    settings = data["settings"]
    assert settings["steps"] == 20 and settings["lr"] == 0.05 and settings["beta"] == 0.0
    assert settings["ns"] == [2, 3] and settings["deltas"] == [0.1, 1.0] and settings["seed"] == 0
    assert data["command"].startswith("python benchmarks/stale_sweep.py --ns 2 3")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stdout, stderr = capsys.readouterr()
    assert "best cell" in stdout and "Final-J margin" in stdout
    assert stderr.count(" s total)") == 8  # one progress line per cell


def test_both_learners_start_from_the_same_initialisations(sweep: ModuleType) -> None:
    args = sweep.parse_args([*TINY, "--stages", "3"])
    cell = sweep.run_cell(args, 3, 1.0, 2)
    check_cell(cell)
    curves, first = cell["per_init"]["curves"], cell["per_init"]["first_update"]
    game = RelayGame(3, 4, 2)
    for i in range(args.inits):
        team = tables(random_logits(game, np.random.default_rng([0, 3, i]), 1.0, 6.0))
        # the documented initialisation, the same for both learners (bit for bit)
        assert curves["teamtr"][i][0] == curves["naive"][i][0] == expected_return(game, team)
        # the first update of a stage optimises the same surrogate under the same team
        assert first["teamtr"][i] == first["naive"][i] != 0.0
    # ... and they differ afterwards: the sweep measures something
    assert any(a[-1] != b[-1] for a, b in zip(curves["teamtr"], curves["naive"]))
    # the same teams in every cell of one n, whatever delta and R
    other = sweep.run_cell(args, 3, 0.1, 2)["per_init"]["curves"]
    assert [c[0] for c in other["teamtr"]] == [c[0] for c in curves["teamtr"]]


def test_a_cell_does_not_depend_on_the_rest_of_the_grid(sweep: ModuleType) -> None:
    alone = sweep.run_cell(sweep.parse_args([*TINY, "--ns", "3"]), 3, 0.1, 1)
    result = sweep.run_sweep(sweep.parse_args(TINY), progress=False)
    (same,) = [c for c in result["grid"] if (c["n"], c["delta"], c["rounds"]) == (3, 0.1, 1)]
    assert same["margin"] == alone["margin"] and same["auc_margin"] == alone["auc_margin"]


def cell(n: int, lo: float, mean: float, hi: float) -> dict[str, Any]:
    margin = {"mean": mean, "ci": [lo, hi]}
    return {
        "n": n,
        "delta": 0.1,
        "rounds": 1,
        "margin": margin,
        "auc_margin": margin,
        "j_final": {"teamtr": 0.5 + mean, "naive": 0.5},
    }


def test_the_best_cell_has_the_largest_lower_bound_not_the_largest_mean(
    sweep: ModuleType,
) -> None:
    grid = [cell(2, -0.01, 0.10, 0.21), cell(3, 0.02, 0.05, 0.08), cell(4, 0.01, 0.03, 0.05)]
    best = sweep.best_cell(grid)
    assert best["n"] == 3 and best["margin"] == {"mean": 0.05, "ci": [0.02, 0.08]}
    assert sweep.best_cell([*grid, cell(6, 0.02, 0.06, 0.10)])["n"] == 6  # tie: larger mean
    with pytest.raises(ValueError, match="no cells"):
        sweep.best_cell([])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--deltas", "0.1", "0"], "every radius must be a finite number > 0"),
        (["--deltas", "-0.5"], "every radius must be a finite number > 0"),
        (["--ns", "1", "4"], "every team size must be >= 2"),
        (["--inits", "1"], "--inits must be >= 2"),
        (["--stages", "0"], "--stages must be >= 1"),
        (["--rounds", "0"], "every R must be >= 1"),
        (["--lr", "0"], "lr must be > 0"),
    ],
)
def test_bad_arguments_exit_with_a_clear_error(
    sweep: ModuleType, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        sweep.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_quick_run_writes_the_best_cell(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert len(data["grid"]) == 18  # n {2, 4, 8} x delta {0.05, 0.3, 1.0} x R {1, 3}
    for c in data["grid"]:
        check_cell(c)
    best = data["best"]
    lo, hi = best["margin"]["ci"]
    assert lo <= best["margin"]["mean"] <= hi
    assert (best["n"], best["delta"], best["rounds"]) in {
        (c["n"], c["delta"], c["rounds"]) for c in data["grid"]
    }
    assert data["settings"]["quick"] is True and "--quick" in data["command"]
    assert "best cell" in proc.stdout
