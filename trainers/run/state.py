"""What a training run carries from stage to stage besides the trainer (checkpointed with it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trainers.optim.records import UpdateRecord


@dataclass
class BestStage:
    """The stage whose team scored best on validation so far (``eval.select: best_validation``)."""

    stage: int
    value: float


@dataclass
class RunState:
    """What a run carries from stage to stage besides the trainer, checkpointed with it.

    Attributes:
        before: the evaluation before training (``eval/``, ``train_eval/`` metrics).
        sft: behaviour cloning's record (seconds, steps, final losses), or ``None``.
        updates: every update record so far.
        best: the best validation stage so far (model selection), or ``None``.
        stopped_early: ``{"stage", "by"}`` when a callback stopped the run, else ``None``.
        diagnostics: each stage's ``diag/*`` metrics with its ``stage``.
    """

    before: dict[str, float] = field(default_factory=dict)
    sft: dict[str, Any] | None = None
    updates: list[UpdateRecord] = field(default_factory=list)
    best: BestStage | None = None
    stopped_early: dict[str, Any] | None = None
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    def to_checkpoint(self) -> dict[str, Any]:
        """Plain data for a checkpoint (weights-only loading takes it; each update record as
        :meth:`UpdateRecord.to_dict` writes it)."""
        return {**dataclasses.asdict(self), "updates": [u.to_dict() for u in self.updates]}

    @classmethod
    def from_checkpoint(cls, data: dict[str, Any]) -> RunState:
        """The state a checkpoint saved (older checkpoints leave keys out: their defaults)."""
        best = data.get("best")
        return cls(
            before=dict(data.get("before") or {}),
            sft=data.get("sft"),
            updates=[UpdateRecord.from_dict(u) for u in data.get("updates") or []],
            best=BestStage(int(best["stage"]), float(best["value"])) if best else None,
            stopped_early=data.get("stopped_early"),
            diagnostics=list(data.get("diagnostics") or []),
        )
