"""TeamTR (Alg. 1): fresh rollouts under the partially updated team before every agent's update.

Update i of a stage learns from rollouts of the team after updates 0..i-1 of the same stage, so
every agent is trained on the contexts its updated predecessors now produce (the stale-context
fix). ``schedule.resample_every = r`` resamples every r updates (an ablation; r = 1 is TeamTR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainers.learners.base import Learner, SamplePlan

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig
    from trainers.stage import Stage


class TeamTR(Learner):
    """Resample before every agent update (every ``resample_every`` updates in the ablation)."""

    def sampling_plan(self, n: int, schedule: ScheduleConfig) -> list[SamplePlan]:
        r = schedule.resample_every
        covers = [(first, min(r, n - first)) for first in range(0, n, r)]
        return [SamplePlan(first, c, schedule.batch_prompts(c)) for first, c in covers]

    def run_stage(self, stage: Stage) -> None:
        for first, covered, prompts in self.sampling_plan(stage.n, stage.schedule):
            batch = stage.sample(first, prompts)  # the team after `first` updates of this stage
            for j in range(covered):
                part, _ = stage.part(batch, j, covered)
                stage.update(stage.order[first + j], part, index=first + j)
