"""AT-GRPO (PettingLLMs; Zhao et al., "Stronger Together: On-Policy Reinforcement Learning for
Collaborative LLMs", arXiv 2510.11062): agent- and turn-wise groups over a tree of candidates.

A stage samples one tree under the stage-start team, of B prompts (``schedule.problems_per_batch``;
``schedule.batch_prompts(1)``): at every turn of a prompt's main path, the acting agent writes
G candidates (``schedule.group_size``) for the same context; each is finished under the current
team and scored by the agent's mixed reward, ``reward.team`` x the team reward +
``reward.local`` x its local reward; the best continues the main path. The G candidates of a
node (a prompt, a turn, its agent) form a group, so each advantage compares one agent's
candidates at one turn. Every agent, in the stage's order, then takes one update on its
candidates: the clipped surrogate and KL penalty of ``optim``, without the token-KL trust region
unless ``learner_options.trust_region`` asks for it (off, as in AT-GRPO).

The budget: an agent that acts at k turns of an episode has k nodes per prompt, so its update
sees B x G x k candidates, as many messages as a TeamTR update on B x G episodes; and the tree of a
T-turn episode plays T x G episodes per prompt, as many as TeamTR's n batches of B x G episodes
when every one of the n agents acts once (T = n).

What differs from the reference (PettingLLMs' ``multi_agents_execution_engine`` and the verl PPO
settings it runs), in short; docs/adding-a-trainer.md has the whole table and the settings that
make each one PettingLLMs':

* **A candidate's score.** PettingLLMs scores a candidate by the environment's reward right after
  its step. A teamtr task rewards the team when the episode ends, so each candidate is finished
  once under the current team and scored by that episode's reward: a one-sample Monte-Carlo
  estimate of its value. A T-turn episode costs T x G episodes per prompt instead of G
  (``stage/rollouts``, ``stage/messages`` and ``stage/tokens`` count them all).
* **The mixed reward** is the ``reward`` section's ``team x R + local x r``; PettingLLMs'
  ``alpha R + r`` is ``team = alpha``, ``local = 1``. The local reward of an episode is the
  task's, over the agent's messages in it (on the main path's earlier turns as well, which are
  equal across a node's candidates and shift no advantage).
* **The update** is every teamtr learner's (a ratio per message, the population std, advantages
  clipped at ``optim.a_clip``, the KL penalty ``trust_region.beta``, ``optim.epochs`` steps);
  ``optim.ratio_level: token``, ``optim.dual_clip``, ``optim.advantage_std: unbiased``,
  ``optim.a_clip: null``, ``trust_region.beta: 0`` and ``optim.epochs: 1`` give PettingLLMs'.
* **Samples of one agent at one turn of one prompt form a group**; PettingLLMs groups by the
  rollout's environment index and the turn, the same thing once its K copies are synchronised.
* **Role-sharing** (``team.shared_policy``: one model plays every agent): PettingLLMs pools every
  agent's samples into one update of the shared model, with the old log-probs computed once
  before it; here each agent's update steps the one model, with its one optimizer, on that
  agent's candidates, in the stage's order, and every update's old log-probs are the sampler's
  (:meth:`~trainers.learners.stage.Stage.keep_sampler_logprobs` scores them before the first
  update moves the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from teamtr_env.runners.tree import Tree
from trainers.learners.base import Learner
from trainers.learners.stage import agent_rewards_of

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig, TrainConfig
    from trainers.learners.stage import Stage


def tree_errors(config: TrainConfig) -> list[str]:
    """What a learner that samples trees needs of ``config`` (one line per problem)."""
    errors = []
    name = config.schedule.learner
    if config.schedule.group_size < 2:
        errors.append(
            f"schedule.group_size: {name} branches every turn into group_size candidates; "
            f"it needs >= 2, got {config.schedule.group_size}"
        )
    if config.runner.backend != "local":
        errors.append(
            f"runner.backend: {name}'s tree sampling runs on the local runner (rollout "
            f"workers cannot branch episodes yet), got {config.runner.backend!r}"
        )
    return errors


@dataclass(frozen=True)
class ATGRPOOptions:
    """AT-GRPO's own settings (``learner_options``)."""

    trust_region: bool = field(
        default=False,
        metadata={
            "help": "keep each agent's update inside the token-KL trust region (trust_region.*); "
            "off by default, as in AT-GRPO"
        },
    )


class ATGRPO(Learner):
    """Tree-structured sampling, then every agent updated on its candidates' node groups."""

    stale_diagnostics: ClassVar[bool] = False  # one stage-start tree: no intermediate teams
    options: ClassVar[type[ATGRPOOptions]] = ATGRPOOptions

    def stage_episodes(self, schedule: ScheduleConfig, agents: int, turns: int) -> tuple[int, str]:
        """One tree per prompt: G candidates at each of its main path's turns, each finished
        under the current team."""
        b, g = schedule.batch_prompts(1), schedule.group_size
        return b * turns * g, f"B={b} prompts x {turns} turns x G={g} candidates"

    def check(self, config: TrainConfig) -> list[str]:
        return super().check(config) + tree_errors(config)

    def run_stage(self, stage: Stage) -> None:
        prompts = stage.schedule.batch_prompts(1)  # B: one node per prompt and acting turn
        batch = stage.sample(0, prompts, strategy=Tree(agent_rewards_of(stage.config)))
        enforce = stage.options.trust_region
        # a shared model's later agents learn from the sampler's log-probs, not the moved model's
        stage.keep_sampler_logprobs([(agent, batch) for agent in stage.order])
        for i, agent in enumerate(stage.order):
            if batch.messages_of(agent):
                stage.update(agent, batch, index=i, trust_region=enforce)
