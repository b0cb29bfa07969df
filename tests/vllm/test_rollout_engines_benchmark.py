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
