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
