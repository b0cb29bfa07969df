"""AT-GRPO: the runner's tree mode (a node per turn of each main path, G candidates each, scored
by finishing them, the best continuing) and the learner that trains every agent on its nodes'
groups (``teamtr/ATGRPO-v0``, ``at_grpo``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers_trainers import config
from test_local_rewards import AGENTS, CHOICES, pipeline_env, tabular

import teamtr_env
from adapters.scripted import ScriptedExpert
from teamtr_core.errors import ConfigError
from teamtr_env.rollout import EpisodeRecord
from teamtr_env.runners import Runner, Tree
from trainers.learners.registry import learner_errors, learner_spec
from trainers.learners.team_trainer import TeamTrainer

WIDTH = 4


def pipeline_runner(error_rate: float = 0.5) -> Runner:
    env = teamtr_env.make("teamtr/Pipeline-v0")
    expert = ScriptedExpert(env.task, error_rate=error_rate, seed=0)
    return Runner(lambda: teamtr_env.make("teamtr/Pipeline-v0"), expert, progress=False)


def test_a_tree_has_a_node_per_turn_of_each_main_path_with_width_candidates() -> None:
    runner = pipeline_runner()
    problems = runner.sample_problems(3, seed=0)
    batch = runner.rollout(problems, WIDTH, seed=1, strategy=Tree())
    turns = len(runner.env.possible_agents)  # every agent does one step of a 3-step chain
    assert batch.group_size == WIDTH and batch.num_groups == len(problems) * turns
    assert len(batch.messages) == len(batch.episodes)  # one candidate per episode
    for g in range(batch.num_groups):
        node = sorted((m for m in batch.messages if m.group == g), key=lambda m: m.episode)
        assert [m.episode for m in node] == list(range(g * WIDTH, (g + 1) * WIDTH))
        assert len({(m.agent, m.turn, m.context) for m in node}) == 1  # one context, one agent
        for m in node:  # each candidate's episode: the main path, the candidate, the rest
            episode = batch.episodes[m.episode]
            assert episode.transcript[m.turn]["text"] == m.text
            assert episode.turns == turns
    # the costs count the continuations: a candidate at turn t is followed by turns - 1 - t
    per_problem = sum(WIDTH * (turns - t) for t in range(turns))
    assert batch.stats.messages == len(problems) * per_problem
    # the same seed, the same tree; another seed, another
    again, other = (runner.rollout(problems, WIDTH, seed=s, strategy=Tree()) for s in (1, 2))
    assert (again.messages, again.episodes) == (batch.messages, batch.episodes)
    assert other.messages != batch.messages


def test_the_best_candidate_by_select_continues_the_main_path() -> None:
    runner = pipeline_runner(error_rate=0.7)
    problems = runner.sample_problems(2, seed=3)

    def longest(episode: EpisodeRecord, agent: str) -> float:  # the longest message of agent's
        return float(max(len(m["text"]) for m in episode.transcript if m["speaker"] == agent))

    batch = runner.rollout(problems, WIDTH, seed=0, strategy=Tree(longest))
    by_group = {
        g: sorted((m for m in batch.messages if m.group == g), key=lambda m: m.episode)
        for g in range(batch.num_groups)
    }
    n = len(problems)
    for g, node in by_group.items():
        if g + n >= batch.num_groups:
            continue  # the last turn: nothing continues
        scores = [longest(batch.episodes[m.episode], m.agent) for m in node]
        best = node[scores.index(max(scores))]
        following = by_group[g + n][0]  # the same problem's next node (nodes: depth, problem)
        assert following.context.endswith(f"{best.text}\n### {following.agent}\n") or (
            best.text in following.context
        )
        assert batch.episodes[following.episode].transcript[best.turn]["text"] == best.text


def test_a_tree_needs_candidates_to_compare() -> None:
    runner = pipeline_runner()
    with pytest.raises(ConfigError, match="tree width must be >= 2"):
        runner.rollout(runner.sample_problems(1), 1, strategy=Tree())


def test_at_grpo_is_registered_and_checks_its_settings() -> None:
    assert learner_spec("at_grpo").id == "teamtr/ATGRPO-v0"
    assert learner_errors(config(schedule={"learner": "at_grpo", "group_size": 4})) == []
    errors = learner_errors(
        config(schedule={"learner": "at_grpo", "group_size": 1}, runner={"backend": "ray"})
    )
    assert any("group_size" in e and ">= 2" in e for e in errors)
    assert any("runner.backend" in e and "local runner" in e for e in errors)


def test_at_grpo_trains_each_agent_on_its_nodes() -> None:
    """A 2-step chain, on AT-GRPO's mixed reward (team + local): each candidate is finished and
    scored by the team's reward plus its writer's own step; each agent learns its step."""
    cfg = config(
        reward={"team": 1.0, "local": 1.0},
        schedule={"learner": "at_grpo", "stages": 6, "problems_per_batch": 4, "group_size": 4},
        optim={"lr": 0.5, "epochs": 2},
        diagnostics=False,
    )
    team = tabular()

    def prob(agent: str, text: str) -> float:
        return float(team[agent].probs("any").detach()[CHOICES.index(text)])

    before = prob("step1", "2 +1"), prob("step2", "Answer: 3")
    trainer = TeamTrainer(cfg, pipeline_env, team)
    for _ in range(cfg.schedule.stages):
        report = trainer.run_stage()
        assert [u.agent for u in report.updates] == list(AGENTS)
        assert all(u.delta == float("inf") for u in report.updates)  # no trust region by default
        # every agent's update saw B x G candidates of its own: one node per prompt
        assert report.metrics["stage/rollouts"] == 2 * 4 * 4  # T = 2 nodes x G per prompt x B
    after = prob("step1", "2 +1"), prob("step2", "Answer: 3")
    assert after[0] > before[0] + 0.2 and after[1] > before[1] + 0.2


def test_the_trust_region_is_available_to_at_grpo() -> None:
    cfg = config(
        schedule={
            "learner": "at_grpo",
            "stages": 1,
            "problems_per_batch": 2,
            "group_size": 4,
        },
        learner_options={"trust_region": True},
        trust_region={"delta": 0.01},
        diagnostics=False,
    )
    report = TeamTrainer(cfg, pipeline_env, tabular()).run_stage()
    assert all(u.delta == pytest.approx(0.01) for u in report.updates)
    assert all(u.in_region for u in report.updates)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 269 s on a slow 2-core machine, sharing it: past the suite's 300 s
def test_the_compare_line_of_the_issue_runs(tmp_path: Path) -> None:
    """``teamtr compare`` with at_grpo beside the other learners (one seed here; the issue's three
    seeds take about nine minutes, each seed's behaviour cloning most of it)."""
    teamtr = str(Path(sys.executable).parent / "teamtr")
    out = tmp_path / "cmp"
    cmd = [teamtr, "compare", "teamtr/Convention-v0", "--learners", "teamtr", "at_grpo"]
    cmd += ["naive_sequential", "independent", "--seeds", "0", "--quick", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = (out / "compare.md").read_text(encoding="utf-8")
    assert "teamtr/ATGRPO-v0" in table
    assert "messages per update: equal" in table or "NOT EQUAL" not in table


def test_teamtr_tree_samples_a_tree_under_the_partially_updated_team_before_every_update() -> None:
    """``teamtr_tree``: before agent i's update, a tree under the team after i updates (its
    versions say so); agent i learns from its candidates, grouped by node (one context per
    group), inside its trust region; its updates see as many messages as TeamTR's."""
    base = {"stages": 1, "problems_per_batch": 4, "group_size": 4}
    cfg = config(
        schedule={"learner": "teamtr_tree", **base},
        optim={"lr": 0.5, "epochs": 2},
        trust_region={"delta": 0.5},
        diagnostics=False,
    )
    assert learner_spec("teamtr_tree").id == "teamtr/TeamTRTree-v0"
    report = TeamTrainer(cfg, pipeline_env, tabular()).run_stage()
    train = [e for e in report.samples if e.purpose == "train"]
    assert [e.index for e in train] == [0, 1]  # a tree per update
    # the second tree was sampled after the first agent's accepted update
    first_accepted = int(report.updates[0].accepted)
    assert train[1].versions[AGENTS[0]] == first_accepted and train[1].versions[AGENTS[1]] == 0
    assert all(u.delta == pytest.approx(0.5) for u in report.updates)  # TeamTR's trust region
    plain = TeamTrainer(
        config(schedule={"learner": "teamtr", **base}, diagnostics=False), pipeline_env, tabular()
    ).run_stage()
    assert [u.messages for u in report.updates] == [u.messages for u in plain.updates]
    # it generates a whole tree per update: T x G episodes per prompt per update
    assert report.metrics["stage/rollouts"] == 2 * (4 * 2 * 4)
    assert report.metrics["stage/messages"] == 2 * 4 * (4 * 2 + 4 * 1)


def test_teamtr_tree_checks_what_a_tree_needs() -> None:
    errors = learner_errors(
        config(schedule={"learner": "teamtr_tree", "group_size": 1}, runner={"backend": "ray"})
    )
    assert any("group_size" in e and "teamtr" in e for e in errors)
    assert any("runner.backend" in e for e in errors)


def test_a_trees_stage_reward_is_its_first_depth_a_plain_batch_of_the_team(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``stage/reward_start`` compares learners: of a tree it is the reward of the first depth's
    episodes (every prompt's first candidates, finished under the team: a plain batch), not of
    the later depths, whose prefixes were chosen greedily."""
    cfg = config(
        schedule={"learner": "at_grpo", "stages": 1, "problems_per_batch": 6, "group_size": 4},
        diagnostics=False,
    )
    trainer = TeamTrainer(cfg, pipeline_env, tabular())
    trees = []
    runner = trainer.sampler.runner
    play = runner.rollout

    def keep(*args, **kwargs):  # type: ignore[no-untyped-def]
        batch = play(*args, **kwargs)
        if kwargs.get("strategy") is not None:
            trees.append(batch)
        return batch

    monkeypatch.setattr(runner, "rollout", keep)
    report = trainer.run_stage()
    (tree,) = trees
    first_depth = [e.reward for e in tree.episodes[: 6 * 4]]
    assert report.metrics["stage/reward_start"] == pytest.approx(
        sum(first_depth) / len(first_depth)
    )
    assert {m.turn for m in tree.messages[: 6 * 4]} == {0}  # the first depth: turn 0 only
    assert report.metrics["stage/reward_start"] != pytest.approx(float(tree.rewards().mean()))
