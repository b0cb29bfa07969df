"""A sharded agent (FSDP2 on a 2-rank gloo gang) updates as the unsharded one does: the same
result (accepted, reason, monitored KL, backtracks, kept fraction, surrogate), log-probs and
weights after the update within tolerance, for an update inside the region, one that is
backtracked into it, and one that is reverted (weights and optimizer state restored exactly);
each rank holds about half of the weights and of the optimizer state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

HELPER = Path(__file__).with_name("helpers_gang.py")
FIELDS_EXACT = ("accepted", "reason", "backtracks", "step_scale", "tokens", "messages")
FIELDS_CLOSE = ("kl_raw", "kl_tok", "l_seq", "ratio_clip_frac")


def _sides(model: Path, case: str, out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    subprocess.run(
        [sys.executable, str(HELPER), str(model), case, str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    solo = torch.load(out / "solo.pt", weights_only=False)
    ranks = [torch.load(out / f"gang{r}.pt", weights_only=False) for r in (0, 1)]
    return solo, ranks


def _check(case: str, solo: dict[str, Any], ranks: list[dict[str, Any]]) -> None:
    for rank in ranks:  # every rank returns the same result, and it is the unsharded one's
        for key in FIELDS_EXACT:
            assert rank["result"][key] == solo["result"][key], (case, key)
        for key in FIELDS_CLOSE:
            assert rank["result"][key] == pytest.approx(solo["result"][key], rel=1e-4, abs=1e-5)
        torch.testing.assert_close(rank["logprobs"], solo["logprobs"], rtol=1e-4, atol=1e-4)
        for name, value in solo["after"]["weights"].items():
            torch.testing.assert_close(rank["after"]["weights"][name], value, rtol=1e-4, atol=1e-4)
    gang = ranks[0]
    if case == "reverted":  # restored exactly, on every rank's shards
        for side in (solo, gang):
            for name, value in side["before"]["weights"].items():
                assert torch.equal(side["after"]["weights"][name], value)
            for index, moments in side["before"]["moments"].items():
                for key, value in moments.items():
                    assert torch.equal(side["after"]["moments"][index][key], value)
    total_params, total_state = solo["local_params"], solo["local_state"]
    assert sum(r["local_params"] for r in ranks) == total_params
    assert sum(r["local_state"] for r in ranks) == total_state
    for rank in ranks:  # about half each (FSDP pads a shard to an even split)
        assert 0.45 * total_params <= rank["local_params"] <= 0.55 * total_params
        assert 0.45 * total_state <= rank["local_state"] <= 0.55 * total_state


@pytest.mark.slow  # starts two interpreters; an update's ranks (shares, padding, gathers) in tests/trainers/test_collective.py
def test_a_backtracked_sharded_update_equals_the_unsharded_one(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    solo, ranks = _sides(tiny_model_dir, "backtracked", tmp_path)
    assert solo["result"]["backtracks"] >= 1 and solo["result"]["accepted"]
    _check("backtracked", solo, ranks)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["accepted", "reverted"])
def test_sharded_updates_equal_the_unsharded_ones(
    tiny_model_dir: Path, tmp_path: Path, case: str
) -> None:
    solo, ranks = _sides(tiny_model_dir, case, tmp_path)
    assert solo["result"]["accepted"] == (case == "accepted")
    _check(case, solo, ranks)
