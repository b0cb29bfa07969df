"""The learner interface."""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, NamedTuple

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig, TrainConfig
    from trainers.stage import Stage


class _SamplePlanFields(NamedTuple):
    first: int
    covered: int
    prompts: int


class SamplePlan(_SamplePlanFields):
    """A learner's plan of one sampling in a stage: before update ``first``, ``prompts`` prompts
    (x G rollouts) that serve ``covered`` updates (under the ``disjoint`` budget, each its own
    slice). What was actually sampled is recorded as a :class:`trainers.team_trainer.SampleEvent`.

    A named tuple ``(first, covered, prompts)``. The count was called ``problems`` before:
    ``SamplePlan(..., problems=n)`` and ``plan.problems`` still work, with a ``FutureWarning``.
    """

    __slots__ = ()

    def __new__(
        cls, first: int, covered: int, prompts: int | None = None, *, problems: int | None = None
    ) -> SamplePlan:
        if problems is not None:
            warnings.warn(
                "SamplePlan(problems=...) is now SamplePlan(prompts=...)",
                FutureWarning,
                stacklevel=2,
            )
            if prompts is not None:
                raise TypeError("SamplePlan: give prompts (problems is its old name), not both")
            prompts = problems
        if prompts is None:
            raise TypeError("SamplePlan: missing the number of prompts (prompts=...)")
        return super().__new__(cls, first, covered, prompts)

    @property
    def problems(self) -> int:
        """Deprecated: :attr:`prompts` (the number of prompts sampled)."""
        warnings.warn("SamplePlan.problems is now SamplePlan.prompts", FutureWarning, stacklevel=2)
        return self.prompts


class Learner(ABC):
    """A learner: what a stage samples, and which agent is updated on what.

    A stage updates every trainable agent once, in the stage's order (``stage.order``). The
    learner calls the shared machinery of :class:`~trainers.team_trainer.Stage`:

    * ``stage.sample(index, prompts)``: ``prompts`` prompts x G rollouts under the team's
      CURRENT parameters (seeded by the stage and ``index``);
    * ``stage.part(batch, j, covered)``: the ``j``-th of ``covered`` disjoint slices of a batch;
    * ``stage.update(agent, batch, index=i)``: one update of ``agent`` on its messages in
      ``batch`` (group advantages of the team reward, clipped surrogate, KL penalty, trust
      region with backtracking, beta/delta adaptation, diagnostics, the update's log record);
    * ``stage.log(key, value)``: an extra stage metric.

    Class attributes:
        stale_diagnostics: the learner has intermediate teams, so the stale gap (diagnostics on)
            is measured for its updates i >= 1.
        importance_weighting: the learner honours ``schedule.importance_weighting``.
    """

    stale_diagnostics: ClassVar[bool] = True
    importance_weighting: ClassVar[bool] = False

    def check(self, config: TrainConfig) -> list[str]:
        """Errors in ``config`` for this learner (one line each; empty: none). Run once, when
        a ``TrainConfig`` naming this learner is built (and by ``TeamTrainer`` for a learner
        object passed to it)."""
        if config.schedule.importance_weighting and not self.importance_weighting:
            return [
                f"schedule.importance_weighting is not supported by {config.schedule.learner!r} "
                "(only by learners that reuse stale rollouts, e.g. teamtr/NaiveSequential-v0)"
            ]
        return []

    @abstractmethod
    def sampling_plan(self, n: int, schedule: ScheduleConfig) -> list[SamplePlan]:
        """The stage's sampling events for ``n`` updates (what it samples, and when)."""

    @abstractmethod
    def run_stage(self, stage: Stage) -> None:
        """Samples and updates every agent of ``stage.order`` once."""


def single_batch_plan(n: int, schedule: ScheduleConfig) -> list[SamplePlan]:
    """One stage-start batch for all ``n`` updates, sized by ``schedule.budget``: ``disjoint``
    n*B prompts (a slice of B per update), ``matched`` as many as TeamTR samples in a stage,
    ``per_sample`` B."""
    return [SamplePlan(0, n, schedule.batch_prompts(n))]
