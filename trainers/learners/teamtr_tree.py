"""TeamTR over trees: fresh contexts (TeamTR's resampling) and same-context groups (AT-GRPO's tree).

Before agent i's update, a tree of B prompts is sampled under the team as updates 0..i-1 of the
stage left it (:mod:`teamtr_env.runners.tree`: at every turn of a prompt's main path, the acting
agent writes G candidates for the same context, each finished under the current team and scored
by the agent's mixed reward; the best continues). Agent i is then updated on its candidates, whose
groups are the tree's nodes, inside its token-KL trust region (``trust_region.delta_mode``). So
every agent learns on the contexts its updated predecessors now produce, as in TeamTR, from
advantages that compare candidates which saw the same context, as in AT-GRPO. No paper describes
this combination; it exists to separate the two effects (docs/benchmarks/learners.md).

The budget: agent i's update sees B x G x k candidates (k: its turns in an episode), as many
messages as a TeamTR update on B x G episodes. Generation is n trees of B x T x G episodes
per stage, n times AT-GRPO's one tree (``stage/messages`` and ``stage/tokens`` count every
candidate and continuation; ``teamtr compare`` reports them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from teamtr_env.runners.tree import Tree
from trainers.learners.at_grpo import tree_errors
from trainers.learners.base import Learner
from trainers.learners.stage import agent_rewards_of

if TYPE_CHECKING:
    from trainers.config import ScheduleConfig, TrainConfig
    from trainers.learners.stage import Stage


class TeamTRTree(Learner):
    """A tree sampled under the partially updated team before every agent's update."""

    def stage_episodes(self, schedule: ScheduleConfig, agents: int, turns: int) -> tuple[int, str]:
        """One tree per update: B prompts x G candidates at each of the main path's turns."""
        b, g = schedule.batch_prompts(1), schedule.group_size
        return (
            agents * b * turns * g,
            f"n={agents} trees x B={b} prompts x {turns} turns x G={g} candidates",
        )

    def check(self, config: TrainConfig) -> list[str]:
        return super().check(config) + tree_errors(config)

    def run_stage(self, stage: Stage) -> None:
        tree = Tree(agent_rewards_of(stage.config))
        for i, agent in enumerate(stage.order):
            # the team after i updates of this stage, branched at every turn
            batch = stage.sample(i, stage.schedule.batch_prompts(1), strategy=tree)
            if batch.messages_of(agent):
                stage.update(agent, batch, index=i)
