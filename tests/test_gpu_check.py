"""benchmarks/gpu_check.py: its CPU mode runs every check in CI, so the GPU script cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fresh import run_fresh

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


@pytest.mark.slow
def test_cpu_mode_runs_every_check_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--device",
            "cpu",
            "--tiny",
            "--out-dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    checks = result["correctness"]
    assert set(checks) == {
        "logprobs_fp32_vs_cpu",
        "logprobs_bf16_vs_cpu",
        "seeded_sampling_reproducible",
        "checkpoint_device_to_cpu",
        "checkpoint_cpu_to_device",
    }
    assert all(c["ok"] for c in checks.values())
    assert checks["logprobs_bf16_vs_cpu"]["value"] > 0  # bfloat16 really ran: not bit-equal
    speed = result["throughput"]
    assert set(speed["generate_tokens_per_s"]) == {"1", "8", "16"}
    assert all(v > 0 for v in speed["generate_tokens_per_s"].values())
    assert speed["logprobs_fwd_bwd_tokens_per_s"] > 0
    stage = result["training_stage"]
    assert stage["agents"] == 3 and stage["rollouts"] == 3 * 4 * 4 and stage["accepted_in_region"]
    assert stage["rollout_s"] > 0 and stage["update_s"] > 0
    assert "| logprobs_fp32_vs_cpu |" in proc.stdout and "one TeamTR stage" in proc.stdout
    layouts = result["team_layouts"]  # one shared base: about one model, separate: about three
    assert layouts["shared"]["param_bytes"] < 0.5 * layouts["separate"]["param_bytes"]
    assert layouts["shared"]["peak_gpu_gb"] is None  # measured on a GPU only
    assert "separate copies vs one shared base" in proc.stdout
    # the vLLM stage runs on a CUDA machine with vLLM only, and says why it did not
    assert result["vllm_stage"]["ran"] is False and result["vllm_stage"]["reason"]
    assert "TeamTR stage with vLLM rollouts: not run" in proc.stdout


@pytest.mark.xdist_group("fresh")  # tests/fresh.py's fork server: one worker starts it
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the real check")
def test_without_cuda_it_exits_2_at_once(tmp_path: Path) -> None:
    proc = run_fresh(
        [sys.executable, str(SCRIPT), "--out-dir", str(tmp_path)],
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "no CUDA device" in proc.stdout
    assert not list(tmp_path.iterdir())  # nothing built or written
