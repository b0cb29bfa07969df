"""One agent's trust region: its state across updates, and the one snapshot an update keeps.

:class:`TrustRegion` owns the penalty ``beta`` and the radius ``delta`` of one agent, and their
adaptation after each update (:func:`adapt_beta`, :func:`adapt_delta`; paper Sec. 4). The stage
asks it for the radius of an update and tells it the update's result; the owner of the agent
(wherever its model lives, one process or a gang of ranks) checkpoints it. Every rank of a gang
is handed the same ``beta`` and ``delta`` by the driver, so they decide alike.

:class:`Snapshot` is what an update keeps to undo itself: one copy of the trainable parameters
and one of the optimizer's state, taken just before the first optimizer step (not while the first
epoch's activations are alive), on the parameters' device or on the host
(``trust_region.snapshot_device``). Backtracking needs no second copy: each halving moves the
parameters halfway back to the snapshot in place (``p <- s + (p - s) / 2``). An update without a
trust region takes no snapshot at all (see :func:`trainers.optim.update.update_agent`). On a gang
(a sharded agent) every rank snapshots, pulls back and restores its own shards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trainers.config import TrustRegionConfig
from trainers.config.sections import SnapshotDevice
from trainers.optim.result import UpdateResult
from trainers.optim.sharding import local_part, restored, saved_copy

__all__ = ["Snapshot", "TrustRegion", "adapt_beta", "adapt_delta"]


def adapt_beta(
    beta: float, result: UpdateResult, delta: float, *, low: float = 1e-4, high: float = 1e3
) -> float:
    """The adaptive penalty rule, on the KL of the parameters actually kept.

    Doubles ``beta`` when the update was reverted (even the smallest step left the region, or the
    loss or KL was not finite), halves it when the kept step used less than half of the region,
    and keeps it otherwise (bounded to ``[low, high]``; the trainer's ``low`` is
    ``trust_region.beta_floor``, ``beta / 32`` by default, so that a radius no step reaches does
    not halve the penalty to nothing). A full step that left the region but was
    backtracked into it does not raise ``beta``: backtracking already fixed the step, and raising
    the penalty as well would throttle the agent twice.
    """
    if not result.accepted or not math.isfinite(result.kl_tok):
        return min(beta * 2.0, high)
    if result.kl_tok < delta / 2:
        return max(beta / 2.0, low)
    return beta


def adapt_delta(delta: float, result: UpdateResult, *, low: float, high: float) -> float:
    """The adaptive radius rule: grow x1.5 after an update that used less than half of the region,
    shrink /1.5 after backtracking or reverting."""
    if result.backtracks or not result.accepted:
        return max(delta / 1.5, low)
    if result.kl_tok < delta / 2:
        return min(delta * 1.5, high)
    return delta


class TrustRegion:
    """One agent's trust-region state: the KL-penalty coefficient ``beta`` and the radius
    ``delta``, adapted after every update as the config says.

    Args:
        config: the run's ``trust_region`` section (initial values and adaptation).
    """

    def __init__(self, config: TrustRegionConfig) -> None:
        self.config = config
        self.beta = config.beta
        self.delta = config.delta

    def radius(self, enforce: bool = True) -> float | None:
        """The radius of the next update: ``delta``, or ``None`` (no region) when ``enforce`` is
        false (a learner's update without one) or ``delta_mode`` is ``none``."""
        if not enforce or self.config.delta_mode == "none":
            return None
        return self.delta

    def adapt(self, result: UpdateResult, radius: float | None) -> None:
        """Adapts ``beta`` (``adapt_beta``, inside a region) and ``delta`` (``delta_mode:
        adaptive``) to an update's result; ``radius`` is what :meth:`radius` gave it."""
        tr = self.config
        if tr.adapt_beta and radius is not None:
            self.beta = adapt_beta(self.beta, result, radius, low=tr.beta_floor)
        if tr.delta_mode == "adaptive":
            self.delta = adapt_delta(self.delta, result, low=tr.delta_min, high=tr.delta_max)

    def state_dict(self) -> dict[str, float]:
        return {"beta": self.beta, "delta": self.delta}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.beta, self.delta = float(state["beta"]), float(state["delta"])


class Snapshot:
    """One copy of an agent's trainable parameters and of its optimizer's state, to undo an
    update (see the module docstring). Taken by :meth:`take`, which the policy step calls just
    before its first optimizer step (later calls do nothing); before that, nothing has changed
    and :meth:`restore` has nothing to do.

    Args:
        params: the trainable parameters (their order is the snapshot's).
        optimizer: their optimizer.
        device: ``"same"`` (the parameters' device) or ``"cpu"`` (the host: a GPU run keeps its
            device memory).
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        optimizer: torch.optim.Optimizer,
        device: SnapshotDevice = "same",
    ) -> None:
        self.params, self.optimizer, self.device = list(params), optimizer, device
        self.values: list[torch.Tensor] | None = None
        self.state: dict[str, Any] | None = None

    @property
    def taken(self) -> bool:
        return self.values is not None

    def _copy(self, tensor: torch.Tensor) -> torch.Tensor:
        """A copy of ``tensor``'s own elements (a sharded tensor's local shard), where the
        snapshot lives."""
        local = local_part(tensor).detach()
        return local.to("cpu", copy=True) if self.device == "cpu" else local.clone()

    def take(self) -> None:
        """Copies the parameters and the optimizer's state (once)."""
        if self.values is not None:
            return
        self.values = [self._copy(p) for p in self.params]
        state = self.optimizer.state_dict()
        self.state = {
            "state": {
                k: {n: self._saved(v) for n, v in s.items()} for k, s in state["state"].items()
            },
            "param_groups": [dict(g) for g in state["param_groups"]],
        }

    def _saved(self, value: Any) -> Any:
        if not torch.is_tensor(value):
            return value
        return saved_copy(self._copy(value), value)  # a shard: with how to make it whole

    def pull_back(self) -> None:
        """Moves every parameter halfway back to its snapshot, in place: ``p <- s + (p - s)/2``
        (one halving of the step; no copy of the full step is kept; a sharded parameter's local
        shard)."""
        assert self.values is not None, "nothing to pull back to: no optimizer step was taken"
        with torch.no_grad():
            for p, s in zip(self.params, self.values):
                local = local_part(p)
                s = s.to(local.device, non_blocking=True)
                local.sub_(s).mul_(0.5).add_(s)

    def restore(self) -> None:
        """Puts the parameters and the optimizer's state back exactly as they were (nothing to
        do when no step was taken)."""
        if self.values is None or self.state is None:
            return
        with torch.no_grad():
            for p, s in zip(self.params, self.values):
                local_part(p).copy_(s)
        state = {
            "state": {
                k: {n: restored(v) for n, v in s.items()} for k, s in self.state["state"].items()
            },
            "param_groups": self.state["param_groups"],
        }
        self.optimizer.load_state_dict(state)  # casts the state to the parameters' device

    def release(self) -> None:
        """Drops the copies (the update is decided)."""
        self.values, self.state = None, None
