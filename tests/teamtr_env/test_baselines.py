"""Inference-time protocols: visibility, majority vote, judge, budgets, and end-to-end runs."""

from __future__ import annotations

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from teamtr_core.errors import ConfigError
from teamtr_core.policy import Generation, SamplingParams
from teamtr_env.baselines import (
    MAX_PROTOCOL_MESSAGES,
    PROTOCOLS,
    build_protocol,
    debate,
    role_play,
    self_consistency,
)
from teamtr_env.evaluation import evaluate
from teamtr_env.protocol import TeamProtocol
from teamtr_env.runners import Runner


class EchoContext:
    """Answers with how many 'Answer:' lines it can see, and records every prompt it got."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts, sampling):
        self.prompts.extend(prompts)
        return [Generation(f"Answer: {p.count(chr(10) + 'Answer:')}") for p in prompts]


class ByName:
    """Each agent answers a fixed value: the value of its name in ``answers``."""

    def __init__(self, value: str) -> None:
        self.value = value

    def generate(self, prompts, sampling):
        return [Generation(f"Answer: {self.value}") for _ in prompts]


def _play(env, policies, problem=None, seed: int = 0) -> None:
    env.reset(seed=seed, options={"problem": problem} if problem is not None else None)
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        policy = policies[agent] if isinstance(policies, dict) else policies
        env.step(policy.generate([env.context(agent)], SamplingParams())[0].text)


def test_self_consistency_agents_never_see_each_other() -> None:
    proto = self_consistency(4)
    env = teamtr_env.make("teamtr/Arith-v0", **proto.env_kwargs)
    policy = EchoContext()
    _play(env, policy)
    assert len(policy.prompts) == 4
    assert [m.text for m in env.transcript] == ["Answer: 0"] * 4  # no agent saw an answer


def test_debate_hides_answers_within_a_round_and_shows_earlier_rounds() -> None:
    proto = debate(n=3, rounds=2)
    env = teamtr_env.make("teamtr/Arith-v0", **proto.env_kwargs)
    policy = EchoContext()
    _play(env, policy)
    seen = [int(m.text.split()[-1]) for m in env.transcript]
    # round 1: nobody sees anything; round 2: each sees the 3 round-1 answers (its own included)
    assert seen == [0, 0, 0, 3, 3, 3]


def test_judge_sees_everything_and_gives_the_graded_answer() -> None:
    proto = debate(n=2, rounds=2, judge=True)
    env = teamtr_env.make("teamtr/Arith-v0", **proto.env_kwargs)
    policy = EchoContext()
    _play(env, policy)
    assert env.transcript[-1].speaker == "judge"
    assert env.transcript[-1].text == "Answer: 4"
    assert env.score is not None and env.score.answer == "4"


def test_majority_vote_grades_the_most_common_answer() -> None:
    env = teamtr_env.make(
        "teamtr/Arith-v0",
        agents=["a", "b", "c"],
        final_answer="majority",
        visibility="own",
    )
    problem = env.task.sample(np.random.default_rng(0))
    gold = problem.answer
    policies = {"a": ByName(str(gold)), "b": ByName(str(gold + 1)), "c": ByName(str(gold))}
    _play(env, policies, problem)
    assert env.score is not None and env.score.correct
    assert env.score.details["votes"] == {str(gold): 2, str(gold + 1): 1}
    # a wrong majority loses even though one agent was right
    policies = {"a": ByName("1000"), "b": ByName(str(gold)), "c": ByName("1000")}
    _play(env, policies, problem, seed=1)
    assert env.score is not None and not env.score.correct and env.score.answer == "1000"


def test_protocol_config_errors_are_reported_together() -> None:
    with pytest.raises(ConfigError) as err:
        TeamProtocol(
            agents=("a", "b"),
            visibility="some",
            final_answer="vote",
            round_size=0,
            full_view=("z",),
        )
    text = str(err.value)
    for part in ("visibility", "final_answer", "round_size", "full_view"):
        assert part in text


def test_majority_needs_a_single_answer_task() -> None:
    from toy_tasks import CountdownTask

    from teamtr_env.env import TeamEnv

    with pytest.raises(ConfigError, match="single-answer task"):
        TeamEnv(CountdownTask(), protocol=TeamProtocol(agents=("a",), final_answer="majority"))


@pytest.mark.parametrize("name", PROTOCOLS)
def test_samples_budget_is_matched_by_counting_messages(name: str) -> None:
    proto = build_protocol(name, budget_kind="samples", budget=6)
    env_fn = lambda: teamtr_env.make("teamtr/Arith-v0", **proto.env_kwargs)  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, 0.2, seed=0), progress=False)
    problems = runner.sample_problems(10, seed=0)
    report = evaluate(runner, problems, 2, seed=0)
    per_episode = report.batch.stats.messages / report.batch.stats.envs
    assert per_episode == proto.messages_per_episode
    assert per_episode == (1 if name == "single" else 5 if name == "debate_judge" else 6)


def test_tokens_budget_is_matched_by_counting_tokens(tiny_model_dir) -> None:
    from adapters.hf import HFPolicy

    policy = HFPolicy.from_pretrained(tiny_model_dir)
    budget = 24
    per_episode = {}
    for name in PROTOCOLS:
        params: dict = {
            "single": {},
            "self_consistency": {"n": 3},
            "debate": {"n": 3, "rounds": 2},
            "debate_judge": {"n": 2, "rounds": 2},
            "role_play": {"turns": 4},
        }[name]
        proto = build_protocol(name, budget_kind="tokens", budget=budget, **params)
        env_fn = lambda p=proto: teamtr_env.make("teamtr/Arith-v0", **p.env_kwargs)  # noqa: E731
        sampling = SamplingParams(max_new_tokens=proto.max_new_tokens, temperature=1.0, seed=0)
        runner = Runner(env_fn, policy, sampling, progress=False)
        report = evaluate(runner, runner.sample_problems(4, seed=0), 2, seed=0)
        stats = report.batch.stats
        per_episode[name] = stats.tokens_generated / stats.envs
        assert proto.max_new_tokens == budget // proto.messages_per_episode
        assert per_episode[name] <= budget
    assert per_episode["single"] > 0


def test_budget_errors() -> None:
    with pytest.raises(ConfigError, match="both budget_kind and budget"):
        build_protocol("debate", budget=4)
    with pytest.raises(ConfigError, match="over the budget"):
        build_protocol("debate_judge", budget_kind="samples", budget=4, n=3, rounds=2)
    with pytest.raises(ConfigError, match="unknown parameters"):
        build_protocol("single", n=3)
    with pytest.raises(ConfigError, match="unknown 'vote'"):
        build_protocol("vote")


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: self_consistency(n=17), "self_consistency with n=17 would generate 17"),
        (lambda: debate(n=2, rounds=9), "18 messages per episode"),
        (lambda: debate(n=8, judge=True), "debate_judge with n=8, rounds=2 would generate 17"),
        (lambda: role_play(turns=17), "role_play with turns=17"),
        (lambda: build_protocol("self_consistency", budget_kind="samples", budget=17), "n=17"),
    ],
)
def test_protocols_past_the_message_limit_are_refused_before_any_agent_is_made(
    build, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """self_consistency n=10^8 (or a samples budget of 10^8) built 10^8 agent names and ended in
    a MemoryError; past MAX_PROTOCOL_MESSAGES it is a ConfigError naming the limit, raised before
    anything is allocated (checked here against a small limit, so a regression costs nothing)."""
    import teamtr_env.baselines as baselines

    assert MAX_PROTOCOL_MESSAGES == 1024
    monkeypatch.setattr(baselines, "MAX_PROTOCOL_MESSAGES", 16)
    with pytest.raises(ConfigError, match="over the limit of 16") as err:
        build()
    assert expected in str(err.value)
    assert self_consistency(n=16).messages_per_episode == 16
