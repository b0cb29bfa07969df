"""teamtr/Pipeline-v0: chain rules, grading, the one-step expert, and the relay visibility that
makes every agent's message matter."""

from __future__ import annotations

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ConstantPolicy, ScriptedExpert
from tasks.base import Problem, TaskConfigError
from tasks.pipeline import PipelineTask, parse_chain, rules, step
from teamtr_env.runners import Runner

NO_PROMPTS = {"step1": "", "step2": "", "step3": ""}


def make(**options):
    return teamtr_env.make("teamtr/Pipeline-v0", system_prompts=NO_PROMPTS, **options)


def test_chain_rules() -> None:
    assert parse_chain("12 -3 +8") == (12, [-3, 8])
    assert parse_chain("7") == (7, [])
    assert parse_chain("Answer: 7") is None and parse_chain("12 - 3") is None
    assert step(7, [5, -3, 8]) == "12 -3 +8"
    assert step(9, [8]) == "Answer: 17"
    assert step(9, [8], error=-2) == "Answer: 15"
    # A dropped rest: the value alone, which the next agent (or the grader) cannot use.
    assert step(7, [5, -3, 8], drop_rest=True) == "12"
    assert step(9, [8], drop_rest=True) == "17"
    assert rules.last_chain("### Problem\n7 +5 -3\n### step1\n") == (7, [5, -3])
    assert rules.last_chain("### step1\nAnswer: 9\n### step2\n") is None


def test_generated_chains_stay_in_range_and_splits_are_disjoint() -> None:
    task = PipelineTask(steps=3, max_operand=5, max_value=9, split="test")
    rng = np.random.default_rng(0)
    problems = [task.sample(rng) for _ in range(300)]
    for p in problems:
        start, ops = parse_chain(p.data["chain"])  # type: ignore[misc]
        values = np.cumsum([start, *ops])
        assert len(ops) == 3 and all(1 <= abs(d) <= 5 for d in ops)
        assert values.min() >= 0 and values.max() <= 9 and p.answer == values[-1]
        assert p.split == "test"
    train = PipelineTask(steps=3, max_operand=5, max_value=9, split="train")
    train_ids = {train.sample(rng).id for _ in range(2000)}
    assert not train_ids & {p.id for p in problems}
    # The demo's held-out split has hundreds of distinct chains (363), not a handful.
    held_out: set[str] = set()
    for _ in range(5000):  # stops at 300: the set only grows, so the outcome is the same
        held_out.add(task.sample(rng).id)
        if len(held_out) >= 300:
            break
    assert len(held_out) >= 300


def test_bad_options_are_all_reported() -> None:
    with pytest.raises(TaskConfigError) as err:
        PipelineTask(steps=0, max_operand=12, max_value=3, split="dev", expert_error="typo")
    assert len(err.value.errors) == 5
    assert "expert_error" in str(err.value)


@pytest.mark.parametrize(
    ("text", "correct", "reason"),
    [
        ("Answer: 17", True, "correct"),
        ("Answer: 16", False, "wrong_answer"),
        ("9 +8", False, "no_answer_tag"),  # an unfinished chain ends in an operand, not the answer
        ("", False, "no_integer_found"),
        ("\x00" * 50, False, "no_integer_found"),
    ],
)
def test_grading(text: str, correct: bool, reason: str) -> None:
    problem = Problem("p", {"chain": "7 +5 -3 +8"}, answer=17)
    score = PipelineTask().grade(problem, text)
    assert score.correct is correct and score.details["reason"] == reason


def test_later_agents_see_only_the_previous_message() -> None:
    env = make()
    env.reset(seed=0, options={"problem": Problem("p", {"chain": "7 +5 -3 +8"}, answer=17)})
    assert env.context("step1") == "### Problem\n7 +5 -3 +8\n### step1\n"
    env.step("12 -3 +8")
    assert env.context("step2") == "### step1\n12 -3 +8\n### step2\n"
    env.step("9 +8")
    # Neither the problem nor step1's message: only the message just before this turn.
    assert env.context("step3") == "### step2\n9 +8\n### step3\n"
    env.step("Answer: 17")
    assert env.score is not None and env.score.correct


def test_expert_team_solves_everything_and_one_bad_link_breaks_the_chain() -> None:
    env_fn = lambda: make()  # noqa: E731
    task = env_fn().task
    expert = ScriptedExpert(task, 0.0)
    runner = Runner(env_fn, expert, progress=False)
    problems = runner.sample_problems(50, seed=1)
    assert runner.rollout(problems, seed=0).rewards().mean() == 1.0
    # Any one agent replaced by a constant wrong message sinks the team: later agents cannot
    # see the problem, so nobody can repair it.
    for agent in ("step1", "step2", "step3"):
        policies = {a: expert for a in ("step1", "step2", "step3")}
        policies[agent] = ConstantPolicy("0 +1 +1")
        broken = Runner(env_fn, policies, progress=False)
        assert broken.rollout(problems, seed=0).rewards().mean() < 0.3, agent


def test_noisy_expert_accuracy_compounds_over_the_chain() -> None:
    env_fn = lambda: make()  # noqa: E731
    runner = Runner(env_fn, ScriptedExpert(env_fn().task, 0.2, seed=0), progress=False)
    batch = runner.rollout(runner.sample_problems(400, seed=2), seed=0)
    # Each link is right with probability 0.8, so the team with about 0.8^3 = 0.51 (a wrong
    # value can still land on the right answer by a later error, rarely).
    assert 0.42 < batch.rewards().mean() < 0.6


def test_expert_that_drops_the_rest_is_right_in_value_and_useless_to_the_team() -> None:
    """The demo's cloned habit: with ``expert_error="drop_rest"`` an erring expert computes the
    step right but leaves out the rest of the chain (or the Answer tag), so the next agent has
    nothing to work on and only the team reward shows the message was bad."""
    env_fn = lambda: make(expert_error="drop_rest")  # noqa: E731
    task = env_fn().task
    rng = np.random.default_rng(0)
    context = "### Problem\n7 +5 -3 +8\n### step1\n"
    assert task.expert_reply(context, rng, make_error=True) == "12"
    assert task.expert_reply(context, rng, make_error=False) == "12 -3 +8"
    assert task.expert_reply("### step2\n9 +8\n### step3\n", rng, make_error=True) == "17"
    # The next agent gets no chain: a short, fixed reply (cheap to clone).
    assert task.expert_reply("### step1\n12\n### step2\n", rng, make_error=False) == "No chain."
    always = Runner(env_fn, ScriptedExpert(task, 1.0, seed=0), progress=False)
    problems = always.sample_problems(50, seed=1)
    assert always.rollout(problems, seed=0).rewards().mean() == 0.0
    noisy = Runner(env_fn, ScriptedExpert(task, 0.2, seed=0), progress=False)
    batch = noisy.rollout(noisy.sample_problems(400, seed=2), seed=0)
    # A dropped link always sinks the team (no lucky cancellation): about 0.8^3 = 0.51.
    assert 0.44 < batch.rewards().mean() < 0.58
