"""The ``teamtr/Math-v0`` plugin: options, prompt, scripted expert, environment and runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks.base import Episode, Problem, TaskConfigError
from tasks.math import MathTask
from tasks.math.generate import DIFFICULTIES, GENERATORS
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "math"


def _context(task: MathTask, problem: Problem) -> str:
    return f"### Problem\n{task.prompt(problem)}\n### agent_0\n"


def test_every_bad_option_is_reported_at_once() -> None:
    with pytest.raises(TaskConfigError) as info:
        MathTask(
            kinds="linear,quadratik",
            difficulty=4,
            split="dev",
            require_think_format="yes",  # type: ignore[arg-type]
            timeout_s=0,
            max_answer_chars=0,
        )
    errors = info.value.errors
    assert len(errors) == 6
    assert "Did you mean 'quadratic'?" in errors[0]
    for fragment in (
        "difficulty",
        "split",
        "require_think_format",
        "timeout_s",
        "max_answer_chars",
    ):
        assert any(p.startswith(fragment) for p in errors), fragment


@pytest.mark.parametrize("kinds", ["", " , ", 3, ["linear", 2]])
def test_bad_kinds(kinds: object) -> None:
    with pytest.raises(TaskConfigError, match="kinds"):
        MathTask(kinds=kinds)  # type: ignore[arg-type]


def test_kinds_as_string_or_list() -> None:
    assert MathTask(kinds="linear, fraction").kinds == ("linear", "fraction")
    assert MathTask(kinds=["system", "system"]).kinds == ("system",)
    assert MathTask().kinds == tuple(GENERATORS)


def test_sample_is_seeded_and_labelled() -> None:
    task = MathTask(difficulty=2, split="validation")
    a = [task.sample(np.random.default_rng(11)) for _ in range(3)]
    b = [task.sample(np.random.default_rng(11)) for _ in range(3)]
    assert a == b
    problem = a[0]
    assert problem.split == "validation"
    assert problem.id.startswith(f"math:{problem.meta['kind']}:d2:")
    assert problem.meta["source"] == "generated" and problem.meta["level"] == 2
    rng = np.random.default_rng(0)
    assert {task.sample(rng).meta["kind"] for _ in range(60)} == set(GENERATORS)


def test_prompt_asks_for_a_box() -> None:
    task = MathTask()
    problem = task.sample(np.random.default_rng(0))
    prompt = task.prompt(problem)
    assert prompt.startswith(problem.data["problem"])
    assert prompt.endswith("put your final answer within \\boxed{}.")
    assert "</think>" in MathTask(require_think_format=True).prompt(problem)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_expert_solves_every_generated_problem(difficulty: int) -> None:
    task = MathTask(difficulty=difficulty)
    rng = np.random.default_rng(difficulty)
    for _ in range(40):
        problem = task.sample(rng)
        reply = task.expert_reply(_context(task, problem), rng, make_error=False, problem=problem)
        score = task.grade(problem, reply)
        assert score.correct, (problem.answer, reply, dict(score.details))


@pytest.mark.parametrize("name", ["math500.jsonl", "aime2024.jsonl", "aime2025.jsonl"])
def test_expert_on_fixtures_right_and_wrong(name: str) -> None:
    task = MathTask()
    rng = np.random.default_rng(0)
    for problem in task.load(FIXTURES / name):
        context = _context(task, problem)
        right = task.expert_reply(context, rng, make_error=False, problem=problem)
        assert task.grade(problem, right).correct
        wrong = task.grade(
            problem, task.expert_reply(context, rng, make_error=True, problem=problem)
        )
        assert wrong.details["reason"] == "wrong_answer", (problem.answer, dict(wrong.details))


def test_expert_error_is_a_plausible_perturbation() -> None:
    task = MathTask()
    problem = Problem("p", {"problem": "Compute $\\frac{0}{3} + 1$."}, "\\frac{14}{3}")
    rng = np.random.default_rng(0)
    reply = task.expert_reply(_context(task, problem), rng, make_error=True, problem=problem)
    assert "\\boxed{\\frac{" in reply and "\\frac{14}{3}" not in reply


def test_expert_without_the_problem_answers_gracefully() -> None:
    task = MathTask()
    reply = task.expert_reply("### agent_0\n", np.random.default_rng(0), make_error=False)
    assert "cannot find the problem" in reply
    problem = task.sample(np.random.default_rng(0))
    assert task.grade(problem, reply).details["reason"] == "no_answer"


def test_think_format_expert_and_failure() -> None:
    task = MathTask(require_think_format=True)
    problem = task.sample(np.random.default_rng(3))
    rng = np.random.default_rng(0)
    reply = task.expert_reply(_context(task, problem), rng, make_error=False, problem=problem)
    assert reply.startswith("<think>")
    assert task.grade(problem, reply).correct
    bare = f"\\boxed{{{problem.answer}}}"
    assert task.grade(problem, bare).details["reason"] == "missing_think_close"
    assert MathTask(require_think_format=False).grade(problem, bare).correct


def test_score_without_a_final_message() -> None:
    task = MathTask()
    problem = task.sample(np.random.default_rng(0))
    score = task.score(Episode(problem, [], None))
    assert (score.correct, score.details["reason"]) == (False, "no_final_message")


def test_registered_env_runs_on_official_data() -> None:
    env = teamtr_env.make(
        "teamtr/Math-v0", data_path=str(FIXTURES / "math500.jsonl"), agents=["a", "b"]
    )
    env.reset(seed=0)
    info: dict = {}
    for _agent in env.agent_iter():
        _, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        assert env.problem is not None
        env.step(f"So the answer is \\boxed{{{env.problem.answer}}}.")
    assert info["score"]["correct"] is True


def test_make_with_options_and_typos() -> None:
    env = teamtr_env.make("teamtr/Math-v0", kinds="fraction", difficulty=3, timeout_s=2.0)
    task = env.task
    assert isinstance(task, MathTask)
    assert task.kinds == ("fraction",) and task.difficulty == 3
    with pytest.raises(teamtr_env.InvalidKwargsError, match="quadratic"):
        teamtr_env.make("teamtr/Math-v0", kinds="quadratics")


def test_runner_error_rate_matches_accuracy() -> None:
    def env_fn() -> teamtr_env.TeamEnv:
        return teamtr_env.make("teamtr/Math-v0")

    # An exact expert is right on any number of problems: 20 show it; the noisy one gets 40 (160
    # answers: the mean's standard error is about 0.04).
    for rate, expected, n in ((0.0, 1.0, 20), (0.3, 0.7, 40)):
        policy = ScriptedExpert(env_fn().task, error_rate=rate, seed=0)
        runner = Runner(env_fn, policy, progress=False)
        report = evaluate(runner, runner.sample_problems(n, seed=0), k=4, seed=0)
        assert abs(report.metrics["avg@4"].mean - expected) < 0.08, (rate, report.metrics)
