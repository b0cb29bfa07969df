"""``sft``: the settings of the behaviour-cloning warm start (:mod:`trainers.optim.sft` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from teamtr_core.choices import choice_errors
from teamtr_core.seeds import seed_errors

LrSchedule = Literal["constant", "cosine"]


@dataclass(frozen=True)
class SFTConfig:
    """Settings of the behaviour-cloning warm start (defaults: the demo's weak start on the
    pipeline task: a noisy expert, wrong at 40% of its steps, cloned for 600 steps of 64
    messages; the tiny model learns the step and the expert's noise, and RL on the team reward
    has the noise to remove)."""

    problems: int = field(default=2000, metadata={"help": "problems the expert plays for the data"})
    steps: int = field(default=600, metadata={"help": "optimizer steps per agent"})
    batch_size: int = field(default=64, metadata={"help": "expert messages per step and agent"})
    lr: float = field(default=3e-3, metadata={"help": "AdamW learning rate"})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay"})
    lr_schedule: LrSchedule = field(
        default="cosine",
        metadata={
            "help": "constant, or cosine decay from lr to 0 over the steps (a sharper clone in "
            "the same number of steps)"
        },
    )
    expert_error_rate: float = field(
        default=0.4, metadata={"help": "probability that an expert message is a plausible error"}
    )
    seed: int = field(
        default=0,
        metadata={"help": "seeds the expert episodes and minibatches", "check": seed_errors},
    )
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm"})
    cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "reuse behaviour-cloned weights across runs: saved here under a hash of "
            "everything that determines them (task, options, model, team, these settings, seed); "
            "null: no cache"
        },
    )
    target_accuracy: float | None = field(
        default=None,
        metadata={
            "help": "stop early once the held-out team match (the product over agents of the "
            "probability of writing the expert message exactly at temperature 1) reaches this; "
            "null: run all steps"
        },
    )

    def __post_init__(self) -> None:
        errors = [
            f"{name} must be >= 1, got {getattr(self, name)}"
            for name in ("problems", "steps", "batch_size")
            if getattr(self, name) < 1
        ]
        if not (self.lr > 0 and self.max_grad_norm > 0 and self.weight_decay >= 0):
            errors.append("lr and max_grad_norm must be > 0 and weight_decay >= 0")
        errors += choice_errors("lr_schedule", self.lr_schedule, LrSchedule)
        if not 0.0 <= self.expert_error_rate <= 1.0:
            errors.append(f"expert_error_rate must be in [0, 1], got {self.expert_error_rate}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            errors.append(f"target_accuracy must be in (0, 1] or None, got {self.target_accuracy}")
        if errors:
            raise ValueError("Invalid SFTConfig: " + "; ".join(errors))
