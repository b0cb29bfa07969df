"""benchmarks/update_memory.py: a ``--quick`` run writes every row of both settings (TRL's when
trl is installed, with its effective settings), each measured in a fresh process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers_bench import run_quick


@pytest.mark.slow
def test_the_quick_run_writes_both_settings(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    data, _ = run_quick("update_memory.py", ["--json", str(out)], out)
    assert set(data["results"]) == {"parameters", "activations"}
    trl = importlib.util.find_spec("trl") is not None
    for result in data["results"].values():
        rows = result["rows"]
        for arm in ("teamtr, trust region on", "teamtr, trust region off"):
            assert rows[arm]["step_bytes"] > 0 and rows[arm]["x_params"] > 0
        assert (rows["TRL GRPOTrainer"] is not None) == trl
        if trl:
            assert rows["TRL GRPOTrainer"]["settings"]["beta"] == 0.0
            assert result["off_over_trl"] > 0
    params = data["results"]["parameters"]
    assert params["trust_region_x_params"] < 3.3  # at most one copy of params and of 2 moments
    for result in data["results"].values():  # one update, unsharded and on 2 ranks
        rows = result["rows"]
        sharded = rows["one update, 2 shards (each rank)"]
        assert rows["one update, unsharded"]["step_bytes"] > 0 and len(sharded["ranks"]) == 2
        assert result["shard_over_unsharded"] > 0
