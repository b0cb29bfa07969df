"""benchmarks/stack_sweep.py: the stale sweep through the real stack (TeamTrainer, tabular relay
agents, exact J after each stage)."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "stack_sweep.py"
TINY = ["--ns", "2", "--deltas", "0.3", "--clips", "0.2", "off", "--betas", "zero"]
TINY += ["--inits", "2", "--stages", "2", "--bootstrap", "100"]


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("stack_sweep")


@pytest.mark.slow  # a benchmark smoke run
def test_a_tiny_grid_writes_the_json_table_and_plot(
    sweep: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot = tmp_path / "stack.json", tmp_path / "stack.png"
    assert sweep.main([*TINY, "--json", str(out), "--plot", str(plot)]) == 0
    data = json.loads(out.read_text())
    assert [(c["clip"], c["beta"]) for c in data["grid"]] == [("0.2", "zero"), ("off", "zero")]
    for cell in data["grid"]:
        lo, hi = cell["margin"]["ci"]
        assert lo <= cell["margin"]["mean"] <= hi
        assert len(cell["curves"]["teamtr"]) == 3  # J before training and after each stage
        # both learners start from the same tables (the run seed draws them)
        assert cell["curves"]["teamtr"][0] == cell["curves"]["naive"][0] == cell["start_J"]
        assert math.isfinite(cell["exact_sweep_margin"])
    assert data["best"]["margin"] in [c["margin"] for c in data["grid"]]
    assert plot.stat().st_size > 0
    assert "real-stack stale sweep" in capsys.readouterr().out


def test_a_cell_run_is_the_run_teamtr_train_makes(sweep: ModuleType, tmp_path: Path) -> None:
    """One run of the sweep equals ``teamtr train`` on the benchmark config with the cell's
    settings (the same tables, batches and updates): its final exact J is the summary's."""
    from teamtr_cli import main

    config = sweep.cell_config(2, 0.3, "off", "zero", 2, seed=1)
    curve = sweep.run_one(config, "teamtr")
    run = tmp_path / "run"
    argv = ["train", "--config", str(sweep.CONFIG), "--run-dir", str(run)]
    for item in (
        "task_options.agents=[a1,a2]",
        "trust_region.delta=0.3",
        "optim.ratio_clip=10.0",
        "trust_region.beta=0.0",
        "trust_region.adapt_beta=false",
        "schedule.stages=2",
        "seed=1",
        "progress=false",
        "loggers=[]",
    ):
        argv += ["--set", item]
    assert main(argv) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["before"]["eval/exact_J"] == pytest.approx(curve[0], abs=1e-12)
    assert summary["after"]["eval/exact_J"] == pytest.approx(curve[-1], abs=1e-12)


@pytest.mark.slow
def test_quick_runs_under_two_minutes_and_writes_best(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert len(data["grid"]) == 2 and data["seconds"] < 120
    best = data["best"]
    assert {"margin", "auc_margin", "n", "delta", "clip", "beta"} <= set(best)
    assert len(best["margin"]["ci"]) == 2
