"""benchmarks/real_model_perf.py: the real model's performance parts, side by side. Fast tests
check the orchestration (a missing model, a missing vLLM venv, ``--only`` keeping the other
parts, the summary it writes); the slow one runs every CPU part for real on the tiny model
(``--quick``); tests/vllm runs the generation part's benchmark with an engine."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "real_model_perf.py"


@pytest.fixture
def perf(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("real_model_perf")


def _update_json() -> dict[str, Any]:
    rows = {
        "trust region on, 1 epoch": {"step_s": 30.0},
        "no trust region, 1 epoch": {"step_s": 27.0},
    }
    return {
        "teamtr": rows,
        "trl": {"step_s": 25.0},
        "ratio_vs_trl": 1.2,
        "ratio_vs_trl_no_tr": 1.08,
    }


def test_a_missing_model_is_refused_with_the_fetch_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "teamtr models get smollm2-135m-instruct" in done.stdout


def test_only_reruns_its_parts_and_keeps_the_others(
    perf: Any, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--only update`` replaces the update part in --json and keeps the plan part already
    there; the generation part without a vLLM venv is skipped with the reason; the summary is
    rebuilt from every part."""
    out = tmp_path / "perf.json"
    plan_part = {
        "rows": {
            "full weights": {
                "plan_bytes": 3 * 2**30,
                "measured_peak_bytes": 2 * 2**30,
                "plan_over_measured": 1.5,
            }
        }
    }
    out.write_text(json.dumps({"parts": {"plan": plan_part, "update": {"result": {}}}}))
    monkeypatch.setattr(perf, "update", lambda model, s, work: {"result": _update_json()})
    argv = ["real_model_perf.py", "--model", str(tiny_model_dir), "--json", str(out)]
    argv += ["--only", "update", "generation", "--vllm-python", str(tmp_path / "no-python")]
    monkeypatch.setattr(sys, "argv", argv)
    assert perf.main() == 0
    data = json.loads(out.read_text())
    assert data["parts"]["plan"] == plan_part
    assert "no vLLM venv" in data["parts"]["generation"]["skipped"]
    summary = data["summary"]
    assert summary["update_s_per_step"]["TRL GRPOTrainer"] == 25.0
    assert summary["update_ratio_vs_trl"] == 1.2
    assert summary["plan"]["full weights"]["plan_over_measured"] == 1.5
    assert "generation" not in summary


def test_a_run_of_every_part_replaces_the_json(
    perf: Any, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --only every part runs and nothing of an earlier JSON is kept."""
    out = tmp_path / "perf.json"
    out.write_text(json.dumps({"parts": {"plan": {"rows": {"old": {}}}}}))
    for part in ("update", "memory", "plan"):
        monkeypatch.setattr(perf, part, lambda model, s, work: {"skipped": "stubbed"})
    monkeypatch.setattr(perf, "generation", lambda model, s, py, work: {"skipped": "stubbed"})
    argv = ["real_model_perf.py", "--model", str(tiny_model_dir), "--json", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    assert perf.main() == 0
    parts = json.loads(out.read_text())["parts"]
    assert set(parts) == {"generation", "update", "memory", "plan"}
    assert all(p == {"skipped": "stubbed"} for p in parts.values())


def test_peak_rss_of_a_child_is_its_own(perf: Any, tmp_path: Path) -> None:
    """The measured peak is the child's alone (not the forking test process's memory): a child
    that held 300 MB and freed it peaks above 300 MB, one that holds nothing far below; a
    failing child raises with its output."""
    hold = "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); del b"
    sleep = "; time.sleep(0.5)"  # alive a while after its peak, as a run's evaluation is
    big, _ = perf.peak_rss_of([sys.executable, "-c", hold + sleep], tmp_path / "big.log")
    small, _ = perf.peak_rss_of([sys.executable, "-c", "pass"], tmp_path / "small.log")
    assert big > 300 * 2**20 > small
    with pytest.raises(RuntimeError, match="boom"):
        perf.peak_rss_of([sys.executable, "-c", "raise SystemExit('boom')"], tmp_path / "fail.log")


@pytest.mark.slow
def test_the_quick_run_measures_every_cpu_part_on_the_tiny_model(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """update, memory and plan for real, on the tiny model (--quick): TRL's rows when trl is
    installed, the plan against a measured peak for both layouts' configs."""
    out = tmp_path / "perf.json"
    command = [sys.executable, str(SCRIPT), "--quick", "--model", str(tiny_model_dir)]
    command += ["--only", "update", "memory", "plan", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    trl = importlib.util.find_spec("trl") is not None
    assert summary["update_s_per_step"]["teamtr, trust region on"] > 0
    assert (summary["update_s_per_step"]["TRL GRPOTrainer"] is not None) == trl
    assert summary["update_peak_bytes"]["teamtr, trust region off"] > 0
    assert set(summary["plan"]) == {"LoRA r16, shared base", "full weights"}
    for row in summary["plan"].values():
        assert row["measured_peak_bytes"] > 200 * 2**20 and row["plan_over_measured"] > 0
    assert "teamtr plan against a training run's peak" in done.stdout


def test_a_config_runs_row_reads_the_engine_figures_of_every_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rollout_engines.stage_row: seconds summed over the stages; the gap, KL and TIS weights
    from the agents' update records only (not the stage means beside them), NaN ones left out;
    none of them without an engine."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    engines = importlib.import_module("rollout_engines")
    nan = float("nan")
    stage = {"stage/wall_s": 10.0, "stage/rollout_s": 4.0, "stage/update_s": 5.0}
    stage |= {"stage/tokens": 100, "stage/reward_mean": 0.5, "rollout/sync_s": 0.5}
    stage |= {"rollout/sync_count": 2, "agent/a/accepted": 1.0, "agent/b/accepted": 1.0}
    first = stage | {"agent/a/logprob_gap": 1e-6, "agent/b/logprob_gap": 3e-6}
    first |= {"rollout/logprob_gap": 99.0, "agent/a/engine_kl": 1e-9, "agent/b/engine_kl": nan}
    first |= {"agent/a/tis_mean": 1.0, "agent/b/tis_mean": 0.5}
    second = stage | {"agent/a/logprob_gap": 2e-6, "agent/b/logprob_gap": nan}
    row = engines.stage_row("vLLM", [first, second])
    assert row["stages"] == 2 and row["wall_s"] == 20.0 and row["syncs"] == 4
    assert row["updates"] == 4 and row["tokens"] == 200 and row["sync_s"] == 1.0
    assert row["logprob_gap_mean"] == pytest.approx(2e-6) and row["logprob_gap_max"] == 3e-6
    assert row["engine_kl_mean"] == 1e-9 and row["tis_mean"] == 0.75
    hf = engines.stage_row("HF", [stage, stage])
    assert hf["logprob_gap_mean"] is None and hf["engine_kl_mean"] is None
    assert hf["tis_mean"] is None and hf["syncs"] == 4
