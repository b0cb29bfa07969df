"""A batch's share (trainers.optim.collective.Share): one process runs the whole batch in plain
micro-batches; ranks of a gang run their contiguous shares in as many passes as one another (a
padding pass weighs nothing and is never gathered); the update gathers the whole batch's
behaviour log-probs. The ranks here are threads (every collective of a real gang, in one
process)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from adapters.tabular import TabularPolicy
from teamtr_core.policy import SamplingParams
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig
from trainers.optim.collective import Share, _share, as_share
from trainers.optim.scoring import scored_rows
from trainers.optim.update import policy_step


class _Hub:
    """What the threads of a fake gang exchange: each collective is a swap of one value each."""

    def __init__(self, size: int) -> None:
        self.size, self.barrier, self.slots = size, threading.Barrier(size), [None] * size

    def exchange(self, rank: int, value: Any) -> list[Any]:
        self.slots[rank] = value
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out


class _ThreadRank:
    """A :class:`~trainers.optim.collective.Group` of threads (the gang's collectives)."""

    def __init__(self, hub: _Hub, rank: int) -> None:
        self.hub, self.rank, self.size = hub, rank, hub.size
        self.gathered: list[int] = []  # the rows this rank handed to each gather

    def share(self, n: int) -> range:
        return _share(n, self.rank, self.size)

    def all_sum(self, values: list[float]) -> list[float]:
        return [sum(v) for v in zip(*self.hub.exchange(self.rank, list(values)))]

    def any(self, flag: bool) -> bool:
        return any(self.hub.exchange(self.rank, flag))

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        self.gathered.append(rows.shape[0])
        parts = self.hub.exchange(self.rank, rows)
        width = max(p.shape[1] for p in parts) if rows.dim() > 1 else None
        if width is None:
            return torch.cat(parts)
        return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1])) for p in parts])


def _messages(n: int) -> tuple[TabularPolicy, list[MessageRecord]]:
    policy = TabularPolicy(["s"], ["x", "y", "z"], featurize=lambda c: "s", init="uniform")
    gens = policy.generate(["s"] * n, SamplingParams(temperature=1.0, seed=0))
    return policy, [
        MessageRecord(i, i, 0, "a", "s", g.text, g.token_ids) for i, g in enumerate(gens)
    ]


def test_one_process_runs_the_whole_batch_in_plain_micro_batches() -> None:
    _, messages = _messages(5)
    share = as_share(messages)
    assert as_share(share) is share and len(share) == 5 and list(share) == messages
    passes = share.micro_batches(2)
    assert [list(p.rows) for p in passes] == [[0, 1], [2, 3], [4]]
    assert [p.fraction for p in passes] == [0.4, 0.4, 0.2] and share.loss_scale == 1.0
    assert Share([]).micro_batches(2) == []


@pytest.mark.parametrize(("n", "size"), [(5, 2), (7, 2), (4, 2)])
def test_ranks_run_as_many_passes_and_padding_weighs_nothing(n: int, size: int) -> None:
    _, messages = _messages(n)
    hub = _Hub(2)
    ranks = [Share(messages, _ThreadRank(hub, r)).micro_batches(size) for r in range(2)]
    assert len(ranks[0]) == len(ranks[1])  # the sharded model's collectives line up
    rows = [r for passes in ranks for p in passes for r in p.rows]
    assert rows == list(range(n))  # contiguous shares, in message order, each message once
    assert sum(p.fraction for passes in ranks for p in passes) == pytest.approx(1.0)
    for p in (p for passes in ranks for p in passes if not p):
        assert p.fraction == 0 and len(p.messages) == 1 and p.own(torch.ones(1, 3)).shape[0] == 0


def test_a_gangs_step_gathers_every_message_once_padding_left_out() -> None:
    """5 messages over 2 ranks, micro-batch 2: rank 0 runs [0, 1], [2]; rank 1 [3, 4] and a
    padding pass. The gathered behaviour log-probs are the 5 messages' (as one process scores
    them), never the padding pass's."""
    policy, messages = _messages(5)
    solo = scored_rows(policy, messages, 2)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.25])
    hub, out = _Hub(2), [None, None]
    groups = [_ThreadRank(hub, r) for r in range(2)]

    def run(rank: int) -> None:
        mine = policy.copy()
        optimizer = torch.optim.SGD(mine.parameters(), lr=0.1)
        out[rank] = policy_step(
            mine, optimizer, Share(messages, groups[rank]), adv, beta=0.0,
            optim=OptimConfig(epochs=1, micro_batch_size=2),
        )  # fmt: skip

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for step in out:
        assert step is not None and step.failed is None
        (block,) = step.behaviour
        assert block.logprobs.shape[0] == 5
        torch.testing.assert_close(block.logprobs[:, : solo.shape[1]], solo, atol=1e-6, rtol=0)
        assert step.n_tokens == sum(len(m.token_ids) for m in messages)
    assert groups[1].gathered[:3] == [2, 2, 2]  # rank 1's 2 messages, not its padding row
