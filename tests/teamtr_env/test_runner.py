"""The runner: one policy call per agent per step, layout, determinism, serialisation, errors."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Sequence

import jsonschema
import numpy as np
import pytest
from toy_tasks import CountdownTask

import teamtr_env
from adapters.scripted import ConstantPolicy, RandomPolicy, ScriptedExpert
from tasks import Problem
from teamtr_core.policy import Generation, SamplingParams
from teamtr_env import ConfigError, PolicyError, TeamEnv, TeamProtocol
from teamtr_env.evaluation import evaluate, report_schema
from teamtr_env.rollout import RolloutBatch, format_episode
from teamtr_env.runners import Runner


class Recorder:
    """Counts calls and batch sizes; answers correctly by reading the prompt."""

    def __init__(self, task) -> None:
        self.expert = ScriptedExpert(task)
        self.batches: list[int] = []

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.batches.append(len(prompts))
        return self.expert.generate(prompts, sampling)


def arith_runner(**kwargs) -> tuple[Runner, dict[str, Recorder]]:
    env = teamtr_env.make("teamtr/Arith-v0", **kwargs)
    recorders = {a: Recorder(env.task) for a in env.possible_agents}
    return Runner(lambda: teamtr_env.make("teamtr/Arith-v0", **kwargs), recorders), recorders


def test_one_policy_call_per_step_with_the_whole_batch() -> None:
    runner, recorders = arith_runner(max_turns=6)
    problems = runner.sample_problems(50, seed=0)
    batch = runner.rollout(problems, group_size=4, seed=0)
    stats = batch.stats
    assert stats.envs == 200 and stats.steps == 6
    assert stats.total_policy_calls == stats.steps  # not envs x steps
    assert stats.policy_calls == {"solver": 2, "critic": 2, "aggregator": 2}
    assert all(r.batches == [200, 200] for r in recorders.values())
    assert stats.messages == 200 * 6 == len(batch.messages)
    assert all(e.correct for e in batch.episodes)


def test_layout_groups_and_messages() -> None:
    runner, _ = arith_runner()
    problems = runner.sample_problems(3, seed=1)
    batch = runner.rollout(problems, group_size=2, seed=0)
    assert [e.problem_id for e in batch.episodes] == [p.id for p in problems for _ in range(2)]
    assert [e.group for e in batch.episodes] == [0, 0, 1, 1, 2, 2]
    assert batch.group_rewards().shape == (3, 2)
    solver = batch.messages_of("solver")
    assert [m.episode for m in solver] == list(range(6))
    assert all(m.turn == 0 and m.context.endswith("### solver\n") for m in solver)
    agg = batch.messages_of("aggregator")
    assert all(m.turn == 2 and "### critic\nAnswer:" in m.context for m in agg)
    assert batch.episodes[0].prompt.startswith("Compute: ")


def test_groups_slices_whole_problems_and_renumbers() -> None:
    runner, _ = arith_runner()
    batch = runner.rollout(runner.sample_problems(3, seed=1), group_size=2, seed=0)
    part = batch.groups(1, 3)
    assert part.num_groups == 2 and part.stats.envs == 4
    assert [e.problem_id for e in part.episodes] == [e.problem_id for e in batch.episodes[2:]]
    assert [e.episode for e in part.episodes] == [0, 1, 2, 3]
    assert [e.group for e in part.episodes] == [0, 0, 1, 1]
    assert [m.text for m in part.messages] == [m.text for m in batch.messages if m.episode >= 2]
    assert {m.episode for m in part.messages} == {0, 1, 2, 3}
    assert part.group_rewards().tolist() == batch.group_rewards()[1:].tolist()
    assert part.stats.messages == len(part.messages)
    with pytest.raises(ValueError, match="0 <= start < stop <= 3"):
        batch.groups(2, 4)


def test_same_seed_same_batch_and_different_seed_differs() -> None:
    def run(seed: int) -> list:
        env = teamtr_env.make("teamtr/Arith-v0")
        runner = Runner(lambda: teamtr_env.make("teamtr/Arith-v0"), ScriptedExpert(env.task, 0.5))
        batch = runner.rollout(runner.sample_problems(20, seed=3), group_size=3, seed=seed)
        return [m.text for m in batch.messages]

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_noisy_expert_team_accuracy_matches_error_rate() -> None:
    env = teamtr_env.make("teamtr/Arith-v0")
    runner = Runner(lambda: teamtr_env.make("teamtr/Arith-v0"), ScriptedExpert(env.task, 0.25))
    batch = runner.rollout(runner.sample_problems(400, seed=0), group_size=4, seed=0)
    accuracy = batch.rewards().mean()
    assert abs(accuracy - 0.75) < 0.03  # the aggregator's own message is graded


def test_interactive_episodes_of_different_lengths() -> None:
    # Agent 'a' says stop in some episodes only (seeded random policy per episode).
    class Sometimes:
        def generate(self, prompts, sampling):
            rng = np.random.default_rng(sampling.seed)
            return ["stop" if rng.random() < 0.3 else "no" for _ in prompts]

    def env_fn() -> TeamEnv:
        return TeamEnv(CountdownTask(), TeamProtocol(agents=("a", "b"), max_turns=8))

    runner = Runner(env_fn, {"a": Sometimes(), "b": ConstantPolicy("no")})
    problem = CountdownTask().sample(np.random.default_rng(0))
    batch = runner.rollout([problem], group_size=64, seed=0)
    turns = {e.turns for e in batch.episodes}
    assert len(turns) > 2  # episodes really ended at different steps
    assert batch.stats.steps == max(turns)
    assert batch.stats.total_policy_calls == batch.stats.steps
    truncated = [e for e in batch.episodes if e.truncated]
    assert truncated and all(e.turns == 8 and not e.correct for e in truncated)
    # Finished episodes stop generating: message count equals the turns actually played.
    assert len(batch.messages) == sum(e.turns for e in batch.episodes)


def test_rollout_batch_serialises() -> None:
    runner, _ = arith_runner()
    batch = runner.rollout(runner.sample_problems(4, seed=0), group_size=2, seed=0)
    data = json.loads(json.dumps(batch.to_dict()))
    again = RolloutBatch.from_dict(data)
    assert again == batch
    assert pickle.loads(pickle.dumps(batch)) == batch
    text = format_episode(batch.episodes[0])
    assert text.startswith("[problem] Compute:") and "[score] reward=1.0" in text


class Clipping:
    """The scripted expert, whose messages at every ``every``-th position of a call's batch are
    marked clipped (as a model's that ran out of tokens would be)."""

    def __init__(self, task, every: int) -> None:
        self.expert = ScriptedExpert(task)
        self.every = every

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        gens = self.expert.generate(prompts, sampling)
        return [dataclasses.replace(g, clipped=i % self.every == 0) for i, g in enumerate(gens)]


def test_clipped_messages_are_recorded_and_each_agents_share_reported() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0")  # noqa: E731
    task = env_fn().task
    policies = {
        "solver": Clipping(task, every=1),
        "critic": Clipping(task, every=2),
        "aggregator": ScriptedExpert(task),
    }
    runner = Runner(env_fn, policies, progress=False)
    problems = runner.sample_problems(4, seed=0)
    batch = runner.rollout(problems, group_size=2, seed=0)
    shares = {"solver": 1.0, "critic": 0.5, "aggregator": 0.0}
    assert all(m.clipped for m in batch.messages_of("solver"))
    assert batch.clipped_ratios() == shares
    # Records keep it through JSON, pickling (Ray ships records), slicing and sharded merging.
    assert RolloutBatch.from_dict(json.loads(json.dumps(batch.to_dict()))) == batch
    assert pickle.loads(pickle.dumps(batch)) == batch
    assert batch.groups(1, 3).clipped_ratios()["solver"] == 1.0
    assert runner.rollout(problems, group_size=2, seed=0, shards=2).clipped_ratios() == shares
    old = batch.to_dict()  # records written before the field existed load as not clipped
    for m in old["messages"]:
        del m["clipped"]
    assert not any(m.clipped for m in RolloutBatch.from_dict(old).messages)
    # The evaluation report says it per agent, in its JSON too (valid against the schema).
    report = evaluate(runner, problems, k=2, seed=0)
    assert report.clipped_ratio == shares
    doc = json.loads(json.dumps({"task": "teamtr/Arith-v0", **report.to_dict()}))
    assert doc["clipped_ratio"] == shares
    jsonschema.validate(doc, report_schema())
    unclipped = Runner(env_fn, ScriptedExpert(task), progress=False)
    assert evaluate(unclipped, problems, k=2).to_dict()["clipped_ratio"] == dict.fromkeys(
        shares, 0.0
    )


def test_policy_map_errors_report_everything() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0")  # noqa: E731
    with pytest.raises(ConfigError) as err:
        Runner(env_fn, {"solver": ConstantPolicy("1"), "judge": ConstantPolicy("1")})
    text = str(err.value)
    assert "no entry for agent 'critic'" in text and "no entry for agent 'aggregator'" in text
    assert "'judge' is not an agent" in text


def test_policy_returning_wrong_count_or_type_is_a_policy_error() -> None:
    class Short:
        def generate(self, prompts, sampling):
            return ["x"] * (len(prompts) - 1)

    class Ints:
        def generate(self, prompts, sampling):
            return [1] * len(prompts)

    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0")  # noqa: E731
    problems = [Problem(id="p", data={"expression": "1 + 1"}, answer=2)]
    with pytest.raises(PolicyError, match=r"agent 'solver' returned 1 generations for 2 prompts"):
        Runner(env_fn, Short()).rollout(problems, group_size=2)
    with pytest.raises(PolicyError, match="returned a int"):
        Runner(env_fn, Ints()).rollout(problems, group_size=2)


def test_rollout_argument_errors() -> None:
    runner = Runner(lambda: teamtr_env.make("teamtr/Arith-v0"), RandomPolicy())
    with pytest.raises(ConfigError, match="group_size"):
        runner.rollout([], group_size=1)
    with pytest.raises(ConfigError, match="group_size"):
        runner.rollout(runner.sample_problems(1), group_size=0)


def test_env_pool_is_reused_and_grows() -> None:
    made = []

    def env_fn() -> TeamEnv:
        made.append(1)
        return teamtr_env.make("teamtr/Arith-v0")

    runner = Runner(env_fn, RandomPolicy())
    runner.rollout(runner.sample_problems(4), group_size=2)
    runner.rollout(runner.sample_problems(4), group_size=2)
    assert len(made) == 8
    runner.rollout(runner.sample_problems(5), group_size=2)
    assert len(made) == 10


def test_sample_problems_from_a_fixed_set() -> None:
    fixed = [Problem(id=f"p{i}", data={"expression": f"{i} + 0"}, answer=i) for i in range(3)]
    runner = Runner(lambda: teamtr_env.make("teamtr/Arith-v0", problems=fixed), RandomPolicy())
    assert {p.id for p in runner.sample_problems(10, seed=0)} <= {"p0", "p1", "p2"}


def test_evaluate_reports_metrics_and_per_problem() -> None:
    env = teamtr_env.make("teamtr/Arith-v0")
    runner = Runner(lambda: teamtr_env.make("teamtr/Arith-v0"), ScriptedExpert(env.task, 0.0))
    report = evaluate(runner, runner.sample_problems(10, seed=0), k=3, include_pass_hat=True)
    assert set(report.metrics) >= {"pass@1", "pass@3", "avg@3", "maj@3", "pass^1", "pass^3"}
    assert all(m.mean == 1.0 for m in report.metrics.values())
    assert report.per_problem[0]["samples"] == 3 and report.per_problem[0]["correct"] == 3
    data = json.loads(json.dumps(report.to_dict()))
    assert data["stats"]["total_policy_calls"] == 3


def test_a_sharded_rollout_keeps_problem_order_and_global_indices() -> None:
    import teamtr_env
    from adapters.scripted import RandomPolicy
    from teamtr_env.runners import Runner, shard_plan

    assert [(a, b) for a, b, _ in shard_plan(7, 3, seed=0)] == [(0, 2), (2, 5), (5, 7)]
    assert [(a, b) for a, b, _ in shard_plan(2, 4, seed=0)] == [(0, 1), (1, 2)]  # no empty blocks
    assert shard_plan(5, 1, seed=9) == [(0, 5, 9)]  # one block: the plain rollout's seeds

    def make():  # type: ignore[no-untyped-def]
        return teamtr_env.make("teamtr/Arith-v0", digits=1)

    runner = Runner(make, RandomPolicy(seed=0), progress=False)
    problems = runner.sample_problems(5, seed=1)
    plain = runner.rollout(problems, group_size=2, seed=3)
    one = runner.rollout(problems, group_size=2, seed=3, shards=1)
    assert (one.episodes, one.messages) == (plain.episodes, plain.messages)
    sharded = runner.rollout(problems, group_size=2, seed=3, shards=3)
    assert [e.episode for e in sharded.episodes] == list(range(10))
    assert [e.problem_id for e in sharded.episodes] == [p.id for p in problems for _ in range(2)]
    assert {m.episode for m in sharded.messages} == set(range(10))
    assert sharded.stats.envs == 10 and sharded.stats.messages == len(sharded.messages)
    again = runner.rollout(problems, group_size=2, seed=3, shards=3)  # deterministic
    assert (again.episodes, again.messages) == (sharded.episodes, sharded.messages)
    # A policy call samples its whole batch from one stream: blocking changes the samples.
    assert sharded.episodes != plain.episodes


def test_make_runner_picks_the_backend_from_its_arguments_or_a_settings_section() -> None:
    """One make_runner for the CLI (a backend and Ray options) and the trainers (a ``runner``
    config section): explicit arguments win over the section, the local runner ignores the Ray
    options, and an unknown backend or option is a ConfigError naming it."""
    from teamtr_env.runners import make_runner

    def env_fn() -> TeamEnv:
        return teamtr_env.make("teamtr/Arith-v0", digits=1)

    @dataclasses.dataclass(frozen=True)
    class Section:
        backend: str = "local"
        workers: int = 3

    policy = RandomPolicy(seed=0)
    runner = make_runner(env_fn, policy, settings=Section(), workers=4)
    assert type(runner) is Runner and runner.progress is None
    assert type(make_runner(env_fn, policy, backend="local", progress=False)) is Runner
    with pytest.raises(ConfigError, match="backend must be one of \\['local', 'ray'\\], got 'gpu'"):
        make_runner(env_fn, policy, settings=Section(backend="gpu"))
    with pytest.raises(ConfigError, match="unknown option 'worker'"):
        make_runner(env_fn, policy, worker=2)
