"""Independent GRPO: every agent takes a plain GRPO step on one stage-start batch, no trust region.

The learner users most often compare a team learner against (CoMLRL's MAGRPO, TRL's GRPO run
per agent): every agent learns as if its teammates were part of the environment. A stage samples
one batch under the stage-start team (sized by ``schedule.budget``, like joint's), and every agent
is updated on its slice with the clipped surrogate and the KL penalty of ``optim`` but without the
token-KL trust region (nothing is backtracked or reverted) and without resampling. The advantage
baseline is ``optim.advantage`` (group mean, leave-one-out or none: MAGRPO, MARLOO, MAREINFORCE).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.learners.stage import Stage


class IndependentGRPO(Learner):
    """Every agent updated on its slice of one stage-start batch, without a trust region."""

    stale_diagnostics: ClassVar[bool] = False  # no intermediate teams: no stale gap to measure

    def run_stage(self, stage: Stage) -> None:
        covered = stage.n  # one stage-start batch serves every update
        prompts = stage.schedule.batch_prompts(covered)
        batch = stage.sample(0, prompts)  # the stage-start team, for every agent
        raw_kl = []
        for i, (agent, part) in enumerate(stage.split(batch, stage.order)):  # each its slice
            record = stage.update(agent, part, index=i, trust_region=False)
            raw_kl.append(record.kl_raw)
        measured = [kl for kl in raw_kl if math.isfinite(kl)]
        if measured:  # with trust_region.monitor_without_region: how far the steps went
            stage.log("independent/kl_max", max(measured))
