"""The ranks an agent's update runs on, and what one process does of an update's batch.

The ranks: one process (:data:`SOLO`), or a gang of processes that shard the agent's model with
FSDP2 (:class:`TorchGroup`, over ``torch.distributed``).

The update never sees them. Its updater hands it the batch as a :class:`Share` (a sequence of
the whole batch's messages): this process's aligned micro-batches of them, the scale of its
loss, and the gathers of what every process must decide alike. On a gang each rank scores and
backpropagates its contiguous share of the messages, in as many passes as every other rank (a
rank short of messages runs a padding pass that weighs nothing, so that the sharded model's
collectives line up); the behaviour and monitored log-probs are gathered (so the trust region's
KL, its backtracks and its accept/revert decision are computed from the same numbers
everywhere), and so are the clipped share and whether any rank met a non-finite loss. A plain
sequence of messages is the whole batch on one process (:func:`as_share`), where every gather is
the identity, so the unsharded update is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, overload

import torch

from teamtr_env.rollout import MessageRecord

__all__ = ["SOLO", "Group", "MicroBatch", "Share", "Solo", "TorchGroup", "as_share"]


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


@dataclass(frozen=True)
class MicroBatch:
    """One forward (and backward) pass of an update.

    Attributes:
        rows: the batch's messages it holds (their indices); empty for a padding pass.
        messages: what the pass runs: those messages, or for a padding pass one message that
            weighs nothing.
        fraction: its messages' share of the whole batch (0 for a padding pass).
    """

    rows: range
    messages: list[MessageRecord]
    fraction: float

    def __bool__(self) -> bool:
        return bool(self.rows)

    @property
    def index(self) -> torch.Tensor:
        """``rows`` as an index tensor (``[0]`` for a padding pass: rows that weigh nothing)."""
        return torch.tensor(list(self.rows) or [0], dtype=torch.long)

    def own(self, values: torch.Tensor) -> torch.Tensor:
        """The rows of a pass's ``values`` that belong to the batch (none for a padding pass)."""
        return values[: len(self.rows)]


class Share(Sequence[MessageRecord]):
    """One process's share of an update's batch (see the module docstring): a sequence of the
    whole batch's messages that knows which of them this process runs, and gathers the rest.

    Args:
        messages: the whole batch.
        group: the ranks the batch is split over (default: one process, the whole batch).
    """

    def __init__(self, messages: Sequence[MessageRecord], group: Group = SOLO) -> None:
        self.messages, self.group = list(messages), group

    @overload
    def __getitem__(self, index: int) -> MessageRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MessageRecord]: ...
    def __getitem__(self, index: int | slice) -> MessageRecord | Sequence[MessageRecord]:
        return self.messages[index]

    def __len__(self) -> int:
        return len(self.messages)

    def subset(self, messages: Sequence[MessageRecord]) -> Share:
        """Other messages split over the same ranks (a monitor's subset of the batch)."""
        return Share(messages, self.group)

    @property
    def loss_scale(self) -> float:
        """What each pass's loss is multiplied by so that the gradients the sharded model
        averages over the ranks sum to the whole batch's (1 on one process)."""
        return float(self.group.size)

    def micro_batches(self, size: int) -> list[MicroBatch]:
        """This process's passes over its messages, ``size`` at a time, padded to as many as
        the process with the most messages runs (none for an empty batch)."""
        n = len(self.messages)
        if n == 0:
            return []
        mine = self.group.share(n)
        count = max(math.ceil(math.ceil(n / self.group.size) / size), 1)
        out = []
        for start in range(mine.start, mine.start + count * size, size):
            rows = range(start, min(start + size, mine.stop)) if start < mine.stop else range(0)
            chunk = [self.messages[r] for r in rows]
            if not chunk:  # padding: one message that weighs nothing
                chunk = [self.messages[mine.start if mine else 0]]
            out.append(MicroBatch(rows, chunk, len(rows) / n))
        return out

    @property
    def alone(self) -> bool:
        """One process runs the whole batch (every gather is the identity)."""
        return self.group.size == 1

    def rows(self, values: torch.Tensor) -> torch.Tensor:
        """This process's ``[n_mine, ...]`` rows as the whole batch's (in message order)."""
        return self.group.gather_rows(values)

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over the whole batch's processes."""
        return self.group.all_sum(values)

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true for some process of the batch."""
        return self.group.any(flag)


def as_share(messages: Sequence[MessageRecord]) -> Share:
    """``messages`` as a :class:`Share`: itself if it is one, else the whole batch on one
    process."""
    return messages if isinstance(messages, Share) else Share(messages)
