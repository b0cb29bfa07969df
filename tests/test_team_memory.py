"""benchmarks/team_memory.py: the quick run writes every layout's sizes, the stage timings and the
projection; a shared base holds about one agent's parameters where separate copies hold three,
and with agent actors the driver holds none."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_bench import run_quick


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_quick_run_writes_the_layouts_and_the_projection(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    result, printed = run_quick("team_memory.py", ["--json", str(out)], out, timeout=600)
    one, separate, shared = (result[k] for k in ("one_agent", "separate", "shared"))
    assert shared["param_bytes"] <= 1.2 * one["param_bytes"]
    assert 2.8 * one["param_bytes"] <= separate["param_bytes"] <= 3.2 * one["param_bytes"]
    for row in (one, separate, shared):
        assert row["peak_rss_bytes"] > row["baseline_rss_bytes"] > 0

    def over(row: dict, who: str = "") -> int:
        return row[f"{who}peak_rss_bytes"] - row[f"{who}baseline_rss_bytes"]

    assert over(separate) > 1.5 * over(shared)  # three bases resident against one
    for backend in ("local", "learner_actors"):
        assert result["stage"][backend]["wall_s"] > 0
    in_driver, actors = result["stage"]["local"], result["stage"]["learner_actors"]
    assert in_driver["driver_param_bytes"] == shared["param_bytes"]
    assert actors["driver_param_bytes"] == 0  # the driver holds no model
    assert over(actors, "driver_") < over(in_driver, "driver_") / 2
    gb = result["projection"]["gb"]
    assert gb["shared_base_one_gpu"] < gb["separate_lora_one_gpu"] / 2
    assert result["gpu"]["status"] == "not yet run"
    assert "assumptions:" in printed and "| shared |" in printed
