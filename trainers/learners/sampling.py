"""What a stage samples from: :class:`TeamSampler`, handed down to every
:class:`~trainers.learners.stage.Stage` by its trainer, owns the runner and draws a stage's
rollouts under the team's current parameters (seeded by the run, the stage and the batch's
index), after sending every changed agent's weights to a distributed runner's workers. A stage
samples through this object, never through its trainer: a stage's data flows one way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teamtr_core.seeds import DIAG_STREAM, PROBLEM_STREAM, TRAIN_STREAM, derive_seed
from teamtr_env.rollout import RolloutBatch
from teamtr_env.runners.tree import Tree
from trainers.config import TrainConfig
from trainers.learners.stage import SampleEvent
from trainers.placement.agents import TrainedAgent

__all__ = ["TeamSampler"]


class TeamSampler:
    """Draws rollouts of the whole team (a :class:`~trainers.learners.stage.Sampler`).

    Args:
        config: the run's configuration (its seed and group size).
        runner: what plays the episodes (a local runner, or a Ray runner's workers).
        agents: every trainable agent's owner (their versions, and their weight syncs).
    """

    def __init__(
        self, config: TrainConfig, runner: Any, agents: Mapping[str, TrainedAgent]
    ) -> None:
        self.config, self.runner, self.agents = config, runner, agents

    def __call__(
        self,
        stage: int,
        index: int,
        prompts: int,
        purpose: str = "train",
        *,
        strategy: Tree | None = None,
    ) -> tuple[RolloutBatch, SampleEvent]:
        """``prompts`` prompts x G rollouts under the CURRENT parameters of every agent (seeded
        by stage and index), and what was sampled; with ``strategy=Tree(select)``, a tree of G
        candidates per turn instead (:mod:`teamtr_env.runners.tree`)."""
        stream = TRAIN_STREAM if purpose == "train" else DIAG_STREAM
        seed = derive_seed(self.config.seed, stream, stage, index)
        self.sync_workers()
        # i.i.d. draws: a training batch samples the distribution the objective averages over (a
        # problem may repeat), unlike an evaluation set.
        problems = self.runner.sample_problems(
            prompts, seed=derive_seed(seed, PROBLEM_STREAM), distinct=False
        )
        group_size = self.config.schedule.group_size
        batch = self.runner.rollout(problems, group_size=group_size, seed=seed, strategy=strategy)
        tokens = batch.stats.tokens_generated or batch.stats.chars_generated
        played = getattr(self.runner, "last_versions", None)
        versions = {a: s.version for a, s in self.agents.items()}
        event = SampleEvent(
            stage,
            index,
            purpose,
            versions,
            batch.stats.envs,
            tokens,
            played,
            messages=batch.stats.messages,
        )
        return batch, event

    def sync_workers(self) -> None:
        """Sends every agent's weights that changed since the last sync to a distributed
        runner's workers (from an agent actor straight through the object store), so they
        never play stale weights; nothing to send on the local runner."""
        for agent in self.agents.values():
            agent.sync(self.runner)
