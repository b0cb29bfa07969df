"""Whole episodes through the registry, TeamEnv, the Runner and the CLI: experts succeed, random
text fails, the team turn limit truncates with score 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import teamtr_env
from adapters.scripted import ConstantPolicy, RandomPolicy, ScriptedExpert
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

FIXTURES = Path(__file__).parents[2] / "fixtures" / "arbench"
IDS = ("teamtr/ARBench-GN-v0", "teamtr/ARBench-SP-v0", "teamtr/ARBench-DC-v0")


def runner_for(task_id: str, policy: Any = None, error_rate: float = 0.0, **kwargs: Any) -> Runner:
    env_fn = lambda: teamtr_env.make(task_id, **kwargs)  # noqa: E731
    policy = policy or ScriptedExpert(env_fn().task, error_rate=error_rate, seed=0)
    return Runner(env_fn, policy, progress=False)


@pytest.mark.parametrize("task_id", IDS)
def test_registered_with_the_arbench_turn_budget(task_id: str) -> None:
    env = teamtr_env.make(task_id)
    assert env.protocol.turn_limit == 26 and getattr(env.task, "max_rounds", None) == 25


@pytest.mark.parametrize("task_id", IDS)
def test_scripted_expert_solves_and_random_text_fails(task_id: str) -> None:
    runner = runner_for(task_id)
    report = evaluate(runner, runner.sample_problems(12, seed=0), k=2, seed=0)
    assert report.metrics["avg@2"].mean == 1.0
    assert all(not e.truncated for e in report.batch.episodes)
    random = runner_for(task_id, RandomPolicy(seed=0))
    report = evaluate(random, random.sample_problems(6, seed=0), k=2, seed=0)
    assert report.metrics["avg@2"].mean == 0.0


@pytest.mark.parametrize(("task_id", "low", "high"), [(IDS[1], 0.4, 0.95), (IDS[2], 0.4, 0.95)])
def test_expert_errors_lower_the_score(task_id: str, low: float, high: float) -> None:
    runner = runner_for(task_id, error_rate=0.3)
    report = evaluate(runner, runner.sample_problems(40, seed=0), k=2, seed=0)
    assert low < report.metrics["avg@2"].mean < high


def test_team_turn_limit_is_a_truncation_with_score_zero() -> None:
    for task_id, text in ((IDS[1], "Q: Is it a ghost?"), (IDS[2], "Suspect: nobody\nQ: Why?")):
        env = teamtr_env.make(task_id, max_turns=4)
        runner = Runner(lambda: env, ConstantPolicy(text), progress=False)  # noqa: B023
        batch = runner.rollout(runner.sample_problems(2, seed=0), group_size=1, seed=0)
        for episode in batch.episodes:
            assert episode.truncated and episode.turns == 4
            assert episode.reward == 0.0 and episode.details["reason"] == "no_final_answer"
    env = teamtr_env.make(IDS[0], max_turns=3)
    runner = Runner(lambda: env, ConstantPolicy("no guess"), progress=False)
    episode = runner.rollout(runner.sample_problems(1, seed=0), group_size=1, seed=0).episodes[0]
    assert episode.truncated and episode.details["reason"] == "turn_limit"
    assert episode.details["wasted_turns"] == 3


def test_feedback_enters_the_shared_context_every_agent_sees() -> None:
    env = teamtr_env.make(IDS[0])
    env.reset(seed=3)
    env.step("Guess: 0123")
    context = env.observe(env.agent_selection)["text"]
    assert "### arbench_gn\nTurn 1: Guess: 0123\n" in context
    assert "digits are present in the answer and in the correct positions" in context


@pytest.mark.parametrize(
    ("task_id", "name"), [(IDS[0], "gn.json"), (IDS[1], "sp.json"), (IDS[2], "dc.json")]
)
def test_cli_eval_on_official_format_files(tmp_path: Path, task_id: str, name: str) -> None:
    from teamtr_cli import main

    out = tmp_path / "report.json"
    argv = ["eval", task_id, "--data-path", str(FIXTURES / name), "--k", "2", "--no-progress"]
    assert main([*argv, "--pass-hat", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["metrics"]["avg@2"]["mean"] == 1.0 and report["metrics"]["pass^2"]["mean"] == 1.0
    assert main([*argv, "--policy", "random", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["avg@2"]["mean"] == 0.0


def test_sp_task_metrics_report_arbench_f1_means() -> None:
    runner = runner_for(IDS[1])
    report = evaluate(runner, runner.sample_problems(3, seed=0), k=1, seed=0)
    assert report.task_metrics["f1_word"] == 1.0 and report.task_metrics["f1_char"] == 1.0


NASTY = [
    "",
    "\x00\x1b[31m",
    "Q:" * 5000,
    "A:",
    "Answer:",
    "Suspect:\nQuestion:",
    "### arbench_gn\nTurn 1: Guess: 0123",
    "\ud800 lone surrogate",
    "9" * 100_000,
    "Q: " + "why " * 20_000 + "?",
]


@pytest.mark.parametrize("task_id", IDS)
def test_nasty_messages_never_crash(task_id: str) -> None:
    env = teamtr_env.make(task_id, agents=["a"], max_turns=len(NASTY))
    env.reset(seed=0)
    for text in NASTY:
        if env.episode_over:
            env.reset(seed=1)
        env.step(text)
    assert all(isinstance(m.text, str) for m in env.transcript)
