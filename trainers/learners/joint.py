"""Joint: one stage-start batch and every agent updated on it, with no intermediate teams.

With separate parameters per agent and no reweighting, joint and naive sequential produce the
same parameters; joint measures no stale gap, because it has no intermediate teams to compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from trainers.learners.base import Learner

if TYPE_CHECKING:
    from trainers.learners.stage import Stage


class Joint(Learner):
    """Every agent updated on (its slice of) one stage-start batch."""

    stale_diagnostics: ClassVar[bool] = False

    def run_stage(self, stage: Stage) -> None:
        covered = stage.n  # one stage-start batch serves every update
        prompts = stage.schedule.batch_prompts(covered)
        batch = stage.sample(0, prompts)
        for i, (agent, part) in enumerate(stage.split(batch, stage.order)):
            stage.update(agent, part, index=i)
