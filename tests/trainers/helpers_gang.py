"""One agent update of the tiny Llama on one process and on a 2-rank gloo gang (FSDP2, started
with torch.multiprocessing), for test_gang's comparisons: ``python helpers_gang.py MODEL_DIR
CASE OUT`` writes ``OUT/solo.pt`` and ``OUT/gang.pt`` (what the update returned, the weights and
the optimizer state after it, the log-probs of the messages after it, and what each rank held).

Each side first takes one accepted update (so that the optimizer has state to restore), then the
case's: ``accepted`` (inside the region), ``backtracked`` (the full step leaves the region and is
halved back into it) or ``reverted`` (no halving brings it back: parameters and optimizer state
restored)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _served import free_port

from adapters.hf import HFPolicy
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig, TrustRegionConfig
from trainers.optim.collective import SOLO, Group, Share, TorchGroup
from trainers.optim.scoring import scored_rows
from trainers.optim.sharding import local_part
from trainers.optim.update import update_agent

TEXTS = ["12+7=19", "3+4=7", "8+8=16", "5+9=14", "1+1=2", "6+2=8", "9+9=18"]  # 7: uneven shares
CASES: dict[str, dict[str, Any]] = {
    "accepted": {"delta": 10.0, "lr": 1e-3, "max_backtracks": 6},
    "backtracked": {"delta": 2e-3, "lr": 3e-2, "max_backtracks": 12},
    "reverted": {"delta": 1e-9, "lr": 3e-2, "max_backtracks": 1},
}


def batch() -> tuple[list[MessageRecord], torch.Tensor]:
    messages = [MessageRecord(i, i, 0, "a", "sum: ", t, ()) for i, t in enumerate(TEXTS)]
    return messages, torch.tensor([1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 0.25])


def one_side(policy: HFPolicy, case: str, group: Group) -> dict[str, Any]:
    """The warm-up update and the case's update of ``policy``; what they did."""
    settings = CASES[case]
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings["lr"])
    messages, adv = batch()
    optim = OptimConfig(epochs=2, lr=settings["lr"], micro_batch_size=2)
    kwargs = {"beta": 0.1, "optim": optim}
    warm = TrustRegionConfig(max_backtracks=6)
    share = Share(messages, group)
    update_agent(policy, optimizer, share, adv, delta=10.0, region=warm, **kwargs)
    before = _whole(policy, optimizer, group)
    region = TrustRegionConfig(max_backtracks=settings["max_backtracks"])
    result = update_agent(
        policy, optimizer, share, adv, delta=settings["delta"], region=region, **kwargs
    )
    after = _whole(policy, optimizer, group)
    logprobs = scored_rows(policy, share, 2)
    local_params = sum(local_part(p).numel() for p in policy.parameters())
    local_state = sum(
        local_part(v).numel()
        for s in optimizer.state.values()
        for v in s.values()
        if torch.is_tensor(v) and v.dim() > 0
    )
    return {
        "result": {k: v for k, v in dataclasses.asdict(result).items() if not k.endswith("_s")},
        "before": before,
        "after": after,
        "logprobs": logprobs,
        "local_params": local_params,
        "local_state": local_state,
    }


def _whole(policy: HFPolicy, optimizer: torch.optim.Optimizer, group: Group) -> dict[str, Any]:
    """The whole weights and optimizer moments (gathered on a gang)."""
    from trainers.optim.sharding import full_optimizer_state, full_state

    weights = full_state(policy.model.state_dict(), keep=True)
    state = full_optimizer_state(optimizer, keep=True)
    assert weights is not None and state is not None
    moments = {k: {n: v for n, v in s.items() if n != "step"} for k, s in state["state"].items()}
    return {"weights": weights, "moments": moments}


def _rank(rank: int, world: int, model_dir: str, case: str, port: int, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from trainers.optim.sharding import shard_policy

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        policy = HFPolicy.from_pretrained(model_dir)
        shard_policy(policy, init_device_mesh("cpu", (world,)))
        outcome = one_side(policy, case, TorchGroup())
        torch.save(outcome, Path(out) / f"gang{rank}.pt")
    finally:
        dist.destroy_process_group()


def main() -> None:
    import torch.multiprocessing as mp

    model_dir, case, out = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    solo = one_side(HFPolicy.from_pretrained(model_dir), case, SOLO)
    torch.save(solo, Path(out) / "solo.pt")
    mp.spawn(_rank, args=(2, model_dir, case, free_port(), out), nprocs=2)


if __name__ == "__main__":
    main()
