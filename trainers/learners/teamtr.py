"""TeamTR (Alg. 1): fresh rollouts under the partially updated team before every agent's update.

Update i of a stage learns from rollouts of the team after updates 0..i-1 of the same stage, so
every agent is trained on the contexts its updated predecessors now produce (the stale-context
fix). ``learner_options.resample_every = r`` resamples every r updates (an ablation; r = 1 is
TeamTR).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.learners.stage import Stage


@dataclass(frozen=True)
class TeamTROptions:
    """TeamTR's own settings (``learner_options``)."""

    resample_every: int = field(
        default=1,
        metadata={"help": "ablation: resample every r updates (1 = before every update: TeamTR)"},
    )

    def __post_init__(self) -> None:
        if self.resample_every < 1:
            raise ValueError(f"resample_every must be >= 1, got {self.resample_every}")


class TeamTR(Learner):
    """Resample before every agent update (every ``resample_every`` updates in the ablation)."""

    options: ClassVar[type[TeamTROptions]] = TeamTROptions

    def run_stage(self, stage: Stage) -> None:
        r = stage.options.resample_every
        for first in range(0, stage.n, r):
            agents = stage.order[first : first + r]
            # the team after `first` updates of this stage
            batch = stage.sample(first, stage.schedule.batch_prompts(len(agents)))
            for j, (agent, part) in enumerate(stage.split(batch, agents)):
                stage.update(agent, part, index=first + j)
