"""The ranks an agent's update runs on: one process (:data:`SOLO`), or a gang of processes that
shard the agent's model with FSDP2 (:class:`TorchGroup`, over ``torch.distributed``).

An update on a gang splits the agent's messages over the ranks (each scores and backpropagates
its contiguous share) and gathers what every rank must decide alike: the behaviour and monitored
log-probs (so the trust region's KL, its backtracks and its accept/revert decision are computed
from the same numbers everywhere), the clipped share, and whether any rank met a non-finite loss.
On one process every operation is the identity, so the unsharded update is unchanged.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["SOLO", "Group", "Solo", "TorchGroup"]


class Group(Protocol):
    """The ranks of one agent's update (``size`` 1: one process)."""

    rank: int
    size: int

    def share(self, n: int) -> range:
        """This rank's contiguous share of ``n`` items (shares differ by at most one, in rank
        order)."""
        ...

    def all_sum(self, values: list[float]) -> list[float]:
        """Each value summed over the ranks."""
        ...

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on some rank."""
        ...

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Every rank's ``[n_r, ...]`` rows in rank order (the other dimensions padded with zeros
        to the largest): with contiguous shares, the rows of all ``n`` items in their order."""
        ...


def _share(n: int, rank: int, size: int) -> range:
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


class Solo:
    """One process: every operation is the identity."""

    rank, size = 0, 1

    def share(self, n: int) -> range:
        return range(n)

    def all_sum(self, values: list[float]) -> list[float]:
        return list(values)

    def any(self, flag: bool) -> bool:
        return flag

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        return rows


SOLO = Solo()
"""The group of an update in one process."""


class TorchGroup:
    """The default ``torch.distributed`` process group: the ranks of a gang (gloo on CPU, NCCL
    on GPUs; collectives run on ``device``)."""

    def __init__(self, device: str | torch.device = "cpu") -> None:
        import torch.distributed as dist

        self.dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.device = torch.device(device)

    def share(self, n: int) -> range:
        return _share(n, self.rank, self.size)

    def all_sum(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        self.dist.all_reduce(tensor)
        return [float(v) for v in tensor.cpu()]

    def any(self, flag: bool) -> bool:
        return self.all_sum([float(flag)])[0] > 0

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        if rows.dtype == torch.bool:  # gloo gathers no booleans
            return self.gather_rows(rows.to(torch.uint8)).bool()
        shape = torch.tensor(list(rows.shape), dtype=torch.long, device=self.device)
        shapes = [torch.zeros_like(shape) for _ in range(self.size)]
        self.dist.all_gather(shapes, shape)
        widest = torch.stack(shapes).max(dim=0).values.tolist()
        padded = rows.new_zeros(widest, device=self.device)
        padded[tuple(slice(0, s) for s in rows.shape)] = rows.to(self.device)
        parts = [torch.zeros_like(padded) for _ in range(self.size)]
        self.dist.all_gather(parts, padded)
        kept = [part[: int(s[0])] for part, s in zip(parts, shapes)]
        return torch.cat(kept).to(rows.device)
