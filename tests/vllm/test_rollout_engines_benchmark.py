"""benchmarks/rollout_engines.py --quick runs against the real engine and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "engines.json"
    script = str(ROOT / "benchmarks" / "rollout_engines.py")
    args = ["--quick", "--prompts", "8", "--new-tokens", "8", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["hf_tok_s"] > 0 and row["vllm_tok_s"] > 0 and row["sync_bytes"] > 0
    assert row["stage_vllm"]["sync_s"] > 0 and row["stage_hf"]["sync_s"] == 0
    assert "HF vs vLLM-CPU rollouts" in done.stdout


def test_a_memory_row_counts_one_engine_for_a_shared_base_team(tiny_model_dir: Path) -> None:
    """The memory table's measure (one layout in a fresh process, as the full run does): a
    shared-base LoRA team with vLLM rollouts starts one multi-LoRA engine for its three agents,
    and the engine's KV cache shows in the peak over the baseline."""
    layout = "shared-base LoRA, vLLM (one multi-LoRA engine)"  # a name argparse checks
    command = [sys.executable, str(ROOT / "benchmarks" / "rollout_engines.py")]
    command += ["--memory-layout", layout, "--model", str(tiny_model_dir)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["engines"] == 1 and row["trainer_param_bytes"] > 0
    # the engine's 1 GiB of KV cache (allocated and touched) is resident beyond the baseline
    assert row["peak_rss_bytes"] - row["baseline_rss_bytes"] > 0.5 * 2**30


def test_a_config_run_on_a_given_model_reports_the_engine_trainer_gap(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """--model and --stage-config (benchmarks/real_model_perf.py's generation part): the
    generate rows on the given model, and teamtr train of the real-model config on it with HF,
    vLLM and vLLM + TIS rollouts: the engine runs sync and keep the gap at float32 rounding,
    their TIS weights are 1, and the HF run has no gap to report."""
    out = tmp_path / "engines.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "rollout_engines.py")]
    command += ["--model", str(tiny_model_dir), "--stage-config", "examples/real_smollm2.yaml"]
    command += ["--prompts", "4", "--new-tokens", "4", "--repeats", "1", "--stages", "1"]
    command += ["--sft-steps", "1", "--json", str(out)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "COLUMNS": "200"}  # unwrapped tables
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    data = json.loads(out.read_text())
    (row,) = data["rows"]
    assert row["model"] == tiny_model_dir.name and data["memory"] == []
    assert row["hf_tok_s"] > 0 and row["vllm_tok_s"] > 0 and "stage_hf" not in row
    hf, vllm, tis = row["config_stages"]
    assert (hf["rollouts"], vllm["rollouts"], tis["rollouts"]) == ("HF", "vLLM", "vLLM + TIS")
    assert hf["logprob_gap_mean"] is None and hf["syncs"] == 0
    for run in (vllm, tis):
        assert run["syncs"] >= 1 and run["updates"] == 2
        assert run["logprob_gap_max"] < 1e-3
    assert vllm["tis_mean"] is None and abs(tis["tis_mean"] - 1.0) < 1e-3
    assert "teamtr train --config examples/real_smollm2.yaml: 1 stage per run" in done.stdout
    assert "log-prob gap mean (max)" in done.stdout
