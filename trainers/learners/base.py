"""The learner interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from teamtr_core.config import from_dict
from teamtr_core.errors import ConfigError

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
    ``stage.options`` holds the learner's own settings (its :attr:`options` dataclass, built
    from the config's ``learner_options``).

    Class attributes:
        stale_diagnostics: the learner has intermediate teams, so the stale gap (diagnostics on)
            is measured for its updates i >= 1.
        options: the learner's own settings, a frozen dataclass (TRL's one config class per
            trainer), or ``None``: it takes none. The config's ``learner_options`` section is
            built as it, so a setting of another learner is refused (an unknown key, with the
            learner's own listed).
    """

    stale_diagnostics: ClassVar[bool] = True
    options: ClassVar[type[Any] | None] = None

    def settings(self, config: TrainConfig) -> Any:
        """The learner's settings in ``config`` (its :attr:`options`, built from
        ``learner_options``; ``None`` for a learner that takes none).

        Raises:
            ConfigError: ``learner_options`` that this learner does not take (every problem).
        """
        built, errors = self._built(config)
        if errors:
            raise ConfigError("training config", errors)
        return built

    def _built(self, config: TrainConfig) -> tuple[Any, list[str]]:
        """The learner's settings built from ``learner_options`` (``None`` when it takes none),
        or the problems that keep them from building (one line each)."""
        given, name = dict(config.learner_options), config.schedule.learner
        if self.options is None:
            keys = ", ".join(sorted(given))
            return None, [f"learner_options: {name} takes no settings, got {keys}"] if given else []
        try:
            return from_dict(self.options, given), []
        except ConfigError as exc:  # keys named as in learner_options, not the dataclass's top
            return None, [
                f"learner_options ({name}): {e.replace(' at top level', '')}" for e in exc.errors
            ]

    def role_sharing_errors(self, config: TrainConfig) -> list[str]:
        """What this learner cannot do when one model plays several agents (a role-sharing
        team; one line each). Checked with the config (``team.shared_policy``) and by
        ``TeamTrainer`` when it is given one policy object for several agents."""
        return []

    def check(self, config: TrainConfig) -> list[str]:
        """Errors in ``config`` for this learner (one line each; empty: none): its
        ``learner_options`` first. Run before a run writes anything
        (:func:`trainers.learners.registry.learner_errors`) and by ``TeamTrainer``."""
        _, errors = self._built(config)
        if not errors and config.team is not None and config.team.shared_policy:
            errors += self.role_sharing_errors(config)
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
