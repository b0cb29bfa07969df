"""The learner interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig, TrainConfig
    from trainers.learners.stage import Stage


class Learner(ABC):
    """A learner: what a stage samples, and which agent is updated on what.

    A stage updates every trainable agent once, in the stage's order (``stage.order``). The
    learner calls the shared machinery of :class:`~trainers.learners.stage.Stage`:

    * ``stage.sample(index, prompts)``: ``prompts`` prompts x G rollouts under the team's
      CURRENT parameters (seeded by the stage and ``index``); what was sampled is the stage
      report's ``samples``;
    * ``stage.part(batch, j, covered)``: the ``j``-th of ``covered`` disjoint slices of a batch;
    * ``stage.update(agent, batch, index=i)``: one update of ``agent`` on its messages in
      ``batch`` (group advantages of the team reward, clipped surrogate, KL penalty, trust
      region with backtracking, beta/delta adaptation, diagnostics, the update's log record).
      ``index`` is the update's position in the order the learner runs the stage's updates,
      0-based, whatever order it chose (``i`` for the ``i``-th update it runs; a position whose
      agent it skips stays unused): it grows from one update to the next and stays below
      ``stage.n``. The diagnostics rely on it: it seeds the update's diagnostic batch, and
      update ``i >= 1`` is taken to come after ``i`` updates of the stage (its stale gap and
      D_occ term compare the team now with the stage-start team; update 0 has none). The
      agent's place in ``stage.order`` is not it when the learner runs another order: the stale
      gap would be measured for the wrong updates (the first to run, with nothing stale yet,
      not the last). An index that repeats, decreases or is out of range is refused
      (:class:`~teamtr_core.errors.LearnerError`, :func:`~trainers.learners.update_index.update_index_problem`);
    * ``stage.log(key, value)``: an extra stage metric.

    ``stage.schedule.batch_prompts(covered)`` sizes a batch that serves ``covered`` updates by
    ``schedule.budget``, so that learners compared at one budget differ only in staleness.

    Class attributes:
        stale_diagnostics: the learner has intermediate teams, so the stale gap (diagnostics on)
            is measured for its updates i >= 1.
        importance_weighting: the learner honours ``schedule.importance_weighting``.
        tree_trust_region: the learner samples trees and honours ``schedule.tree_trust_region``.
    """

    stale_diagnostics: ClassVar[bool] = True
    importance_weighting: ClassVar[bool] = False
    tree_trust_region: ClassVar[bool] = False

    def check(self, config: TrainConfig) -> list[str]:
        """Errors in ``config`` for this learner (one line each; empty: none). Run before a run
        writes anything (:func:`trainers.learners.registry.learner_errors`) and by
        ``TeamTrainer``."""
        errors = []
        if config.schedule.importance_weighting and not self.importance_weighting:
            errors.append(
                f"schedule.importance_weighting is not supported by {config.schedule.learner!r} "
                "(only by learners that reuse stale rollouts, e.g. teamtr/NaiveSequential-v0)"
            )
        if config.schedule.tree_trust_region and not self.tree_trust_region:
            errors.append(
                f"schedule.tree_trust_region is not supported by {config.schedule.learner!r} "
                "(only by learners that sample trees, e.g. teamtr/ATGRPO-v0; the other learners "
                "keep their updates in the trust region by trust_region.delta_mode)"
            )
        return errors

    def stage_episodes(self, schedule: ScheduleConfig, agents: int, turns: int) -> tuple[int, str]:
        """At most how many episodes one stage samples, and how that count is made (for the
        check against ``schedule.max_stage_episodes`` before a run starts). The default, for
        learners that sample B prompts x G rollouts for each of the ``agents`` updates at most:
        n x B x G. A learner that samples otherwise says so by overriding this."""
        b, g = schedule.problems_per_batch, schedule.group_size
        return agents * b * g, f"n={agents} updates x B={b} prompts x G={g} rollouts"

    @abstractmethod
    def run_stage(self, stage: Stage) -> None:
        """Samples and updates every agent of ``stage.order`` once."""
