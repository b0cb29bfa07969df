"""Joint: one stage-start batch and every agent updated on it, with no intermediate teams.

With separate parameters per agent and no reweighting, joint and naive sequential produce the
same parameters; joint measures no stale gap, because it has no intermediate teams to compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from trainers.learners.base import Learner, SamplePlan, single_batch_plan

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig
    from trainers.stage import Stage


class Joint(Learner):
    """Every agent updated on (its slice of) one stage-start batch."""

    stale_diagnostics: ClassVar[bool] = False

    def sampling_plan(self, n: int, schedule: ScheduleConfig) -> list[SamplePlan]:
        return single_batch_plan(n, schedule)

    def run_stage(self, stage: Stage) -> None:
        ((_, covered, prompts),) = self.sampling_plan(stage.n, stage.schedule)
        batch = stage.sample(0, prompts)
        for i, agent in enumerate(stage.order):
            stage.update(agent, stage.part(batch, i, covered)[0], index=i)
