"""TeamTR (Alg. 1): fresh rollouts under the partially updated team before every agent's update.

Update i of a stage learns from rollouts of the team after updates 0..i-1 of the same stage, so
every agent is trained on the contexts its updated predecessors now produce (the stale-context
fix). ``schedule.resample_every = r`` resamples every r updates (an ablation; r = 1 is TeamTR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.learners.stage import Stage


class TeamTR(Learner):
    """Resample before every agent update (every ``resample_every`` updates in the ablation)."""

    def run_stage(self, stage: Stage) -> None:
        r = stage.schedule.resample_every
        for first in range(0, stage.n, r):
            agents = stage.order[first : first + r]
            # the team after `first` updates of this stage
            batch = stage.sample(first, stage.schedule.batch_prompts(len(agents)))
            for j, (agent, part) in enumerate(stage.split(batch, agents)):
                stage.update(agent, part, index=first + j)
