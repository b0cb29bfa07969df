"""Naive sequential: rollouts sampled once, at the stage start, and reused for every update.

Update i learns from rollouts of the stage-start team, although agents 0..i-1 have already
changed: the stale context distribution that TeamTR removes. The ``disjoint`` budget (default)
samples n*B prompts and gives update i the i-th slice of B, so data and gradient work per update
equal TeamTR's. ``learner_options.importance_weighting`` reweights each episode by the
already-updated agents' probability ratios (the IS ablation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch

from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.config import TrainConfig
    from trainers.learners.stage import Stage


@dataclass(frozen=True)
class NaiveSequentialOptions:
    """Naive sequential's own settings (``learner_options``)."""

    importance_weighting: bool = field(
        default=False,
        metadata={
            "help": "ablation: reweight the stale rollouts by the already-updated agents' ratios"
        },
    )


class NaiveSequential(Learner):
    """One stage-start batch; every agent, in order, updated on its slice of it."""

    options: ClassVar[type[NaiveSequentialOptions]] = NaiveSequentialOptions

    def role_sharing_errors(self, config: TrainConfig) -> list[str]:
        if not self.settings(config).importance_weighting:
            return []
        return [
            "learner_options.importance_weighting: with a shared policy (team.shared_policy) "
            "every update changes every agent's messages, which the updated agents' ratios "
            "leave out; set it to false"
        ]

    def run_stage(self, stage: Stage) -> None:
        covered = stage.n  # one stage-start batch serves every update
        prompts = stage.schedule.batch_prompts(covered)
        start = stage.sample(0, prompts)  # the stage-start team, reused for every update
        weighted = stage.options.importance_weighting
        log_ratio = torch.zeros(len(start.episodes), dtype=torch.float64)
        parts = [stage.part(start, i, covered) for i in range(covered)]
        stage.keep_sampler_logprobs([(a, p) for a, (p, _) in zip(stage.order, parts)])
        for i, agent in enumerate(stage.order):
            part, offset = parts[i]
            if not weighted:
                stage.update(agent, part, index=i)
                continue
            # w^{0->i-1}: the agents updated so far, on the episodes of this update's slice
            weights = stage.trajectory_weights(part.messages_of(agent), log_ratio, offset)
            before = stage.score(agent, start.messages_of(agent))
            stage.update(agent, part, index=i, weights=weights)
            log_ratio += stage.episode_log_ratio(agent, start, before)
