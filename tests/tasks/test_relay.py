"""Tests for the ``teamtr/Relay-v0`` task: rules (rendering, parsing, the observed symbol) and the
``RelayTask`` plugin (sampling, grading, the relay's visibility and turn limit, scripted expert)."""

from __future__ import annotations

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ScriptedExpert
from tasks import Problem, SupportsExpert, TaskConfigError
from tasks.relay import rules
from tasks.relay.task import RelayTask
from teamtr_env.runners import Runner


def test_rules_round_trip() -> None:
    for x in (0, 7, 99):
        assert rules.parse_message(rules.render_message(x)) == x
        assert rules.observed_symbol(rules.render_prompt(x)) == x
    assert rules.parse_message("  m3\n") == 3
    for bad in ("m", "3", "m-1", "m 3", "mm3", "m3 m4", "m1234", "", "secret 3"):
        assert rules.parse_message(bad) is None, bad


def test_observed_symbol_takes_the_last_symbol_line() -> None:
    assert rules.observed_symbol("sys\n### Problem\nsecret 2\n### a1\n") == 2
    assert rules.observed_symbol("sys\n### a1\nm3\n### a2\n") == 3
    assert rules.observed_symbol("secret 1\nm0\nm2\n### a3\n") == 2
    assert rules.observed_symbol("no symbol here\n### a1\n") is None


def test_task_arguments_are_checked() -> None:
    for bad in (1, 101, 2.0, True, "4"):
        with pytest.raises(TaskConfigError, match="symbols must be an integer in 2..100"):
            RelayTask(symbols=bad)  # type: ignore[arg-type]


def test_sampling_is_uniform_over_secrets_with_unique_ids() -> None:
    task = RelayTask(symbols=3)
    rng = np.random.default_rng(0)
    problems = [task.sample(rng) for _ in range(3000)]
    counts = np.bincount([p.answer for p in problems], minlength=3)
    assert np.all(np.abs(counts / 3000 - 1 / 3) < 0.03), counts
    assert len({p.id for p in problems}) == 3000
    assert all(p.split == "train" and p.data["secret"] == p.answer for p in problems)
    assert task.prompt(problems[0]) == f"secret {problems[0].answer}"


def test_grading() -> None:
    task = RelayTask(symbols=4)
    problem = Problem("relay:K4:s2:d0", {"secret": 2, "symbols": 4}, answer=2)
    cases = {
        "m2": (1.0, "correct", "2"),
        " m2 ": (1.0, "correct", "2"),
        "m1": (0.0, "wrong_answer", "1"),
        "m7": (0.0, "out_of_range", "7"),
        "the answer is m2": (0.0, "malformed", None),
        "": (0.0, "malformed", None),
    }
    for text, (reward, reason, answer) in cases.items():
        score = task.grade(problem, text)
        assert (score.reward, score.details["reason"], score.answer) == (reward, reason, answer)
        assert score.correct == (reward == 1.0)


def test_registered_relay_has_previous_visibility_and_no_split() -> None:
    spec = teamtr_env.spec("teamtr/Relay-v0")
    assert not spec.accepts("split")  # a toy: K secrets cannot make a held-out split
    env = teamtr_env.make("teamtr/Relay-v0", agents=["a1", "a2"], max_turns=4, symbols=5)
    assert env.protocol.visibility == "previous"
    env.reset(seed=3)
    seen = []
    for agent in env.agent_iter():
        _, _, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        seen.append((agent, rules.observed_symbol(env.context(agent))))
        env.step(f"m{len(seen)}")
    secret = env.problem.answer  # type: ignore[union-attr]
    # turn 0 sees the secret; turn t > 0 sees only the message of turn t - 1
    assert seen == [("a1", secret), ("a2", 1), ("a1", 2), ("a2", 3)]
    assert "secret" not in env.context("a2")
    assert info["score"]["answer"] == "4"


def test_scripted_identity_code_always_wins() -> None:
    env_fn = lambda: teamtr_env.make("teamtr/Relay-v0", agents=["a", "b", "c"], max_turns=6)  # noqa: E731
    task = env_fn().task
    assert isinstance(task, SupportsExpert)
    runner = Runner(env_fn, ScriptedExpert(task), progress=False)
    batch = runner.rollout(runner.sample_problems(8, seed=0), group_size=2, seed=0)
    assert float(batch.rewards().mean()) == 1.0
    noisy = Runner(env_fn, ScriptedExpert(task, error_rate=1.0), progress=False)
    wrong = noisy.rollout(noisy.sample_problems(8, seed=0), group_size=2, seed=0)
    assert len(wrong.episodes) == 16
    assert float(wrong.rewards().mean()) < 1.0
