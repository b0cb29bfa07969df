"""benchmarks/openenv_load.py: the quick load test on loopback (4 concurrent OpenEnv sessions of
``teamtr serve textarena/Hanabi-v0``) loses and mixes nothing: every served episode equals the
same moves played in process, and the server is healthy after."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_bench import run_quick


@pytest.mark.slow
@pytest.mark.xdist_group("openenv")
def test_the_quick_load_test_matches_in_process_play(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    result, printed = run_quick("openenv_load.py", ["--json", str(out)], out, timeout=600)
    assert result["sessions"] == 4 and result["episodes"] == 8
    assert result["mismatched_episodes"] == [] and result["server_healthy_after"]
    assert (
        result["steps"] >= 8
        and 0 < result["step_latency_ms"]["p50"] <= result["step_latency_ms"]["p99"]
    )
    assert "| mismatched |" in " ".join(printed.split()) or "mismatched" in printed
