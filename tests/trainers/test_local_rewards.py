"""Per-agent local rewards: the tasks that give them (Pipeline, ToolUse), how TeamEnv keeps them
(and survives a task that gets them wrong), how a training config mixes them with the team reward,
and where they are logged (stage metrics, evaluations)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers_trainers import config, small

import teamtr_env
from adapters.tabular import TabularPolicy
from tasks import Episode, Message, Problem
from tasks.pipeline import PipelineTask
from teamtr_core.errors import ConfigError
from teamtr_env.runners import Runner
from trainers.learners.stage import agent_rewards, batch_advantages
from trainers.learners.team_trainer import TeamTrainer
from trainers.optim.advantages import group_advantages

AGENTS = ("step1", "step2")
CHAIN = Problem(id="pipeline:1+1+1", data={"chain": "1 +1 +1"}, answer=3)
# step1 does "1 +1 +1" -> "2 +1"; step2 then answers "Answer: 3"
CHOICES = ["2 +1", "5 +1", "Answer: 3", "Answer: 6"]


def pipeline_env() -> teamtr_env.TeamEnv:
    return teamtr_env.make(
        "teamtr/Pipeline-v0", agents=list(AGENTS), steps=2, problems=[CHAIN], system_prompts={}
    )


def tabular(seed: int = 0) -> dict[str, TabularPolicy]:
    return {
        a: TabularPolicy(["any"], CHOICES, featurize=lambda c: "any", init="uniform", seed=seed + i)
        for i, a in enumerate(AGENTS)
    }


def transcript(*texts: str) -> Episode:
    messages = [Message("agent", f"step{i + 1}", t) for i, t in enumerate(texts)]
    return Episode(CHAIN, tuple(messages), texts[-1])


def test_the_pipeline_credits_each_agent_for_its_own_step_alone() -> None:
    task = PipelineTask(steps=2)
    assert task.local_rewards(transcript("2 +1", "Answer: 3")) == {"step1": 1.0, "step2": 1.0}
    # a wrong first step; the second does its own step of what it was given right
    assert task.local_rewards(transcript("5 +1", "Answer: 6")) == {"step1": 0.0, "step2": 1.0}
    assert task.local_rewards(transcript("2 +1", "Answer: 4")) == {"step1": 1.0, "step2": 0.0}
    # no chain handed on: the next agent cannot do a step
    assert task.local_rewards(transcript("2", "Answer: 3")) == {"step1": 0.0, "step2": 0.0}
    assert task.local_rewards(transcript("2 +1", "3")) == {"step1": 1.0, "step2": 0.0}  # no tag


def test_tool_use_credits_valid_actions_and_not_malformed_calls() -> None:
    env = teamtr_env.make("teamtr/ToolUse-v0", agents=["a", "b"])
    env.reset(seed=0)
    env.step('<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>')  # a
    env.step("<tool_call>{not json")  # b
    env.step(
        '<tool_call>{"name": "find_user_id_by_email", "arguments": {"email": "x@y.z"}}</tool_call>'
    )  # a
    env.step("Could you tell me your email address?")  # b: a message to the user
    state = env._state  # the episode's own tally, before it ends
    assert state.valid_actions == {"a": [False, True], "b": [False, True]}
    episode = Episode(env.problem, tuple(env.transcript), None, state)  # type: ignore[arg-type]
    assert env.task.local_rewards(episode) == {"a": 0.5, "b": 0.5}


class LocalTask(PipelineTask):
    """A pipeline whose local rewards are whatever the test says (an error, a NaN, a stranger)."""

    given: Any = None

    def local_rewards(self, episode: Episode) -> Mapping[str, float]:
        if isinstance(self.given, Exception):
            raise self.given
        return self.given  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (RuntimeError("boom"), "local_rewards raised RuntimeError('boom')"),
        ({"step1": math.nan}, "not a finite number for an agent of the team: 'step1': nan"),
        ({"judge": 1.0}, "'judge': 1.0"),
        ({"step1": "1"}, "'step1': '1'"),
    ],
)
def test_a_task_that_gets_local_rewards_wrong_costs_them_not_the_episode(
    given: Any, error: str
) -> None:
    env = pipeline_env()
    task = LocalTask(steps=2)
    task.given = given
    env.task = task
    env.reset(seed=0)
    env.step("2 +1")
    env.step("Answer: 3")
    assert env.score is not None and env.score.reward == 1.0  # the team reward stands
    assert env.local_rewards == {}
    info = env.infos["step1"]
    assert info["local_rewards"] == {} and error in info["local_rewards_error"]


def test_the_mix_is_the_team_reward_alone_by_default_and_weighs_both_when_asked() -> None:
    runner = Runner(pipeline_env, tabular(), progress=False)
    batch = runner.rollout([CHAIN] * 3, group_size=4, seed=0)
    team = batch.group_rewards()
    local = np.stack([batch.local_rewards(a).reshape(-1, 4) for a in AGENTS])
    assert batch.has_local_rewards() and local.std() > 0  # the episodes differ
    default = config()
    for agent in AGENTS:  # the default (1, 0): the team reward, bit for bit, the old path
        assert np.array_equal(agent_rewards(batch, default, agent), team)
    mixed = config(reward={"team": 0.5, "local": 2.0})
    for i, agent in enumerate(AGENTS):
        np.testing.assert_allclose(agent_rewards(batch, mixed, agent), 0.5 * team + 2.0 * local[i])
    # each agent's advantages are the group advantages of its own reward: with the team weight
    # 0, step1's are those of its own step, whatever step2 did
    only_local = config(reward={"team": 0.0, "local": 1.0})
    adv = batch_advantages(batch, only_local, "step1").advantages
    right = np.array([e.transcript[0]["text"] == "2 +1" for e in batch.episodes]).reshape(-1, 4)
    expected = group_advantages(torch.tensor(right, dtype=torch.float32)).advantages
    torch.testing.assert_close(adv, expected)
    assert not torch.equal(adv, batch_advantages(batch, default, "step1").advantages)


def test_training_on_local_rewards_logs_them_and_learns_each_agents_step() -> None:
    cfg = config(
        reward={"team": 0.0, "local": 1.0},
        schedule={"stages": 4, "problems_per_batch": 4, "group_size": 4},
        optim={"lr": 0.5, "epochs": 2},
        trust_region={"delta_mode": "none"},
        diagnostics=False,
    )
    team = tabular()
    before = {a: team[a].probs("any")[CHOICES.index(c)] for a, c in zip(AGENTS, CHOICES[::2])}
    trainer = TeamTrainer(cfg, pipeline_env, team)
    reports = [trainer.run_stage() for _ in range(cfg.schedule.stages)]
    for report in reports:
        for agent in AGENTS:
            assert 0.0 <= report.metrics[f"agent/{agent}/local_reward"] <= 1.0
    after = {a: team[a].probs("any")[CHOICES.index(c)] for a, c in zip(AGENTS, CHOICES[::2])}
    assert after["step1"] > before["step1"] + 0.1  # "2 +1": step1's own step
    # step2's right answer depends on what step1 handed on; both of its right answers rise
    right2 = sum(team["step2"].probs("any")[CHOICES.index(c)] for c in ("Answer: 3", "Answer: 6"))
    assert right2 > 0.5 + 0.1


def test_a_task_without_local_rewards_refuses_a_local_weight_before_writing(
    tmp_path: Path,
) -> None:
    from trainers.run.entry import train

    with pytest.raises(ConfigError, match=r"reward.local: teamtr/Arith-v0 gives no local rewards"):
        train(small(tmp_path / "run", reward={"local": 0.5}))
    assert not (tmp_path / "run").exists()


def test_evaluations_log_each_agents_mean_local_reward() -> None:
    from trainers.run.team_eval import evaluate_team

    cfg = config(eval={"problems": 1, "k": 8})
    out = evaluate_team(cfg, pipeline_env, tabular())
    for agent in AGENTS:
        assert 0.0 <= out[f"eval/{agent}/local_reward"] <= 1.0
    assert "eval/avg@8" in out  # the team's metrics as ever
