"""ToolUseTask in the team environment: reward, expert, random floor, limits, CLI, data files."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import ConstantPolicy, RandomPolicy, ScriptedExpert
from tasks.base import Problem
from tasks.tooluse import PolicyUser, ToolUseTask
from tasks.tooluse.db import canonical_hash
from tasks.tooluse.expert import call_text
from tasks.tooluse.tasks_data import ToolTask
from teamtr_cli import main
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "tooluse"
TASK_ID = "teamtr/ToolUse-v0"


def make(**kwargs: Any) -> teamtr_env.TeamEnv:
    return teamtr_env.make(TASK_ID, **kwargs)


def play(env: teamtr_env.TeamEnv, problem: Problem, reply: Callable[[str], str]) -> dict[str, Any]:
    """Plays one episode where every agent answers ``reply(context)``; returns the final info."""
    env.reset(seed=0, options={"problem": problem})
    info: dict[str, Any] = {}
    for _agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else reply(observation["text"]))
    return info


def gold_player(task: ToolTask) -> Callable[[str], str]:
    """Calls the gold actions in order (no confirmations), says the outputs, then says goodbye."""
    script = [call_text(a.name, a.kwargs) for a in task.actions]
    if task.outputs:
        script.append("The answer: " + ", ".join(task.outputs))
    script.append("Is there anything else I can help you with?")
    steps = iter(script)
    return lambda context: next(steps, "Goodbye!")


@pytest.fixture(scope="module")
def env() -> teamtr_env.TeamEnv:
    return make()


@pytest.fixture(scope="module")
def problems(env: teamtr_env.TeamEnv) -> list[Problem]:
    return env.task.problem_pool()  # type: ignore[attr-defined]


def test_registered_defaults(env: teamtr_env.TeamEnv) -> None:
    protocol = env.protocol
    assert protocol.turn_limit == 30 and protocol.tool_calls == "canonical"
    assert (protocol.max_message_chars, protocol.max_context_chars) == (6000, 80000)
    assert isinstance(env.task, ToolUseTask)


def test_prompt_and_tool_results_fit_the_limits(
    env: teamtr_env.TeamEnv, problems: list[Problem]
) -> None:
    task = env.task
    assert isinstance(task, ToolUseTask)
    longest_prompt = max(len(task.prompt(p)) for p in problems)
    results = [
        task.toolbox.execute(task.db, "get_order_details", {"order_id": o}).text
        for o in task.db["orders"]
    ]
    results += [
        task.toolbox.execute(task.db, "get_product_details", {"product_id": p}).text
        for p in task.db["products"]
    ]
    results += [
        task.toolbox.execute(task.db, "get_user_details", {"user_id": u}).text
        for u in task.db["users"]
    ]
    longest_result = max(len(r) for r in results) + 40
    assert longest_result < env.protocol.max_message_chars
    # the opening prompt plus 30 turns of the longest results still fit without dropping anything
    assert longest_prompt + 30 * longest_result < env.protocol.max_context_chars
    assert "### " not in task.prompt(problems[0])  # would look like a message header


@pytest.mark.parametrize("index", range(12))
def test_replaying_the_gold_actions_scores_1(
    env: teamtr_env.TeamEnv, problems: list[Problem], index: int
) -> None:
    problem = problems[index]
    info = play(env, problem, gold_player(ToolTask.from_problem(problem)))
    score = info["score"]
    assert score["reward"] == 1.0, score
    assert score["details"]["db_match"] and all(score["details"]["outputs_found"].values())
    assert score["details"]["invalid_calls"] == 0


def test_expert_solves_every_shipped_task(env: teamtr_env.TeamEnv, problems: list[Problem]) -> None:
    runner = Runner(lambda: make(), ScriptedExpert(env.task, seed=0), progress=False)
    batch = runner.rollout(problems, group_size=2, seed=0)
    assert [e.reward for e in batch.episodes] == [1.0] * 24
    assert {e.details["end_reason"] for e in batch.episodes} == {"user_stop", "transfer"}
    assert max(e.turns for e in batch.episodes) < 15
    # the expert follows the policy: it asks before writing and identifies the user when asked
    transcript = " ".join(m["text"] for e in batch.episodes for m in e.transcript)
    assert "Do you confirm (yes/no)?" in transcript and "User: My email is" in transcript


def test_random_policy_fails_every_task(env: teamtr_env.TeamEnv, problems: list[Problem]) -> None:
    runner = Runner(lambda: make(), RandomPolicy(seed=0), progress=False)
    batch = runner.rollout(problems, group_size=2, seed=0)
    assert all(e.reward == 0.0 for e in batch.episodes)
    assert all(e.truncated and e.details["reason"] == "turn_limit" for e in batch.episodes)


def test_expert_errors_lower_the_success_rate(
    env: teamtr_env.TeamEnv, problems: list[Problem]
) -> None:
    runner = Runner(
        lambda: make(), ScriptedExpert(env.task, error_rate=0.3, seed=0), progress=False
    )
    report = evaluate(runner, problems, k=4, seed=0, include_pass_hat=True)
    assert 0.3 < report.metrics["avg@4"].mean < 0.95
    assert report.metrics["pass^4"].mean <= report.metrics["avg@4"].mean


def test_wrong_argument_from_the_expert(env: teamtr_env.TeamEnv, problems: list[Problem]) -> None:
    task = env.task
    assert isinstance(task, ToolUseTask)
    env.reset(seed=0, options={"problem": problems[0]})
    context = env.observe("solver")["text"]
    gold = call_text(**_first_action(problems[0]))
    wrong = {
        task.expert_reply(context, np.random.default_rng(s), make_error=True, problem=problems[0])
        for s in range(5)
    }
    assert gold not in wrong and all(w.startswith("<tool_call>") for w in wrong)


def _first_action(problem: Problem) -> dict[str, Any]:
    action = problem.answer["actions"][0]
    return {"name": action["name"], "arguments": action["kwargs"]}


def test_invalid_calls_keep_the_database_and_the_episode_going(
    env: teamtr_env.TeamEnv, problems: list[Problem]
) -> None:
    task = env.task
    assert isinstance(task, ToolUseTask)
    state = task.start(problems[0], np.random.default_rng(0))
    before = canonical_hash(state.db)
    bad = [
        '<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": 1, "reason": "no longer needed"}}</tool_call>',
        '<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": "#W5001001"}}</tool_call>',
        '<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": "#W5001001", "reason": "no longer needed", "sudo": true}}</tool_call>',
        '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>',
        '<tool_call>{"name": "get_order_details", "arguments": {"order_id": "#W1\'; DROP TABLE orders; --"}}</tool_call>',
        '<tool_call>{"name": "think", "arguments": {"thought": "'
        + "x" * 1_000_000
        + '"}}</tool_call>',
        "<tool_call>{not json}</tool_call>",
    ]
    replies = [task.respond(state, "solver", text) for text in bad]
    assert all(
        r is not None
        and r.startswith(("Invalid tool call: Error", "Tool get_order_details failed"))
        for r in replies
    ), replies
    assert canonical_hash(state.db) == before
    assert state.invalid_calls == 6 and state.tool_errors == 1 and not state.done
    assert state.said == []  # nothing reached the user


def test_outputs_count_only_in_messages_to_the_user(
    env: teamtr_env.TeamEnv, problems: list[Problem]
) -> None:
    problem = problems[6]  # information task: outputs "3" and "39.9", no write
    task = ToolTask.from_problem(problem)
    said_with_call = iter(
        [
            call_text("think", {"thought": "3 options, cheapest 39.9"}) + " 3 options 39.9",
            "Is there anything else?",
        ]
    )
    info = play(env, problem, lambda c: next(said_with_call, "bye"))
    assert info["score"]["details"]["reason"] == "missing_outputs"
    info = play(env, problem, gold_player(task))
    assert info["score"]["reward"] == 1.0


def test_wrong_write_is_a_db_mismatch(env: teamtr_env.TeamEnv, problems: list[Problem]) -> None:
    wrong = iter(
        [
            call_text(
                "cancel_pending_order", {"order_id": "#W5001001", "reason": "ordered by mistake"}
            ),
            "Anything else?",
        ]
    )
    info = play(env, problems[0], lambda c: next(wrong, "bye"))
    assert info["score"]["details"]["reason"] == "db_mismatch"
    assert info["score"]["details"]["end_reason"] == "user_stop"


def test_transfer_ends_the_episode(env: teamtr_env.TeamEnv, problems: list[Problem]) -> None:
    transfer = call_text("transfer_to_human_agents", {"summary": "wants a human"})
    info = play(env, problems[0], lambda c: transfer)
    assert info["turn"] == 1 and info["score"]["details"]["end_reason"] == "transfer"
    assert info["score"]["reward"] == 0.0  # the order was not cancelled


def test_turn_limit_is_a_truncation_with_reward_0(problems: list[Problem]) -> None:
    env = make(max_turns=4)
    info = play(env, problems[11], gold_player(ToolTask.from_problem(problems[11])))
    assert info["score"]["reward"] == 1.0  # three calls: transfer within the limit
    info = play(env, problems[10], gold_player(ToolTask.from_problem(problems[10])))
    assert info["turn_limit_reached"] and info["score"]["details"]["reason"] == "turn_limit"
    assert info["score"]["reward"] == 0.0


def test_policy_user_plugs_in(problems: list[Problem]) -> None:
    env = make(user_sim=PolicyUser(ConstantPolicy("Thanks, bye! ###STOP###")))
    info = play(env, problems[0], lambda c: "Hello, how can I help?")
    assert info["turn"] == 1 and info["score"]["details"]["end_reason"] == "user_stop"
    assert info["transcript"][-1]["text"] == "User: Thanks, bye! ###STOP###"


def test_seeded_episodes_repeat(problems: list[Problem]) -> None:
    def run() -> list[str]:
        runner = Runner(
            lambda: make(), ScriptedExpert(make().task, error_rate=0.5, seed=3), progress=False
        )
        batch = runner.rollout(problems[:4], group_size=2, seed=7)
        return [m["text"] for e in batch.episodes for m in e.transcript]

    assert run() == run()


def test_tau_task_file_through_data_path() -> None:
    env = make(data_path=str(FIXTURES / "tau_retail_tasks.py"))
    assert env.problems is not None and len(env.problems) == 2
    runner = Runner(
        lambda: make(data_path=str(FIXTURES / "tau_retail_tasks.py")),
        ScriptedExpert(env.task),
        progress=False,
    )
    batch = runner.rollout(env.problems, seed=0)
    assert [e.reward for e in batch.episodes] == [1.0, 1.0]


def test_own_database_and_task_file() -> None:
    options = {"db_dir": str(FIXTURES / "mini_db"), "task_file": str(FIXTURES / "mini_tasks.json")}
    env = make(**options)
    runner = Runner(lambda: make(**options), ScriptedExpert(env.task), progress=False)
    batch = runner.rollout(runner.sample_problems(1), seed=0)
    assert batch.episodes[0].reward == 1.0


def test_config_errors_are_reported_together() -> None:
    with pytest.raises(teamtr_env.InvalidKwargsError) as err:
        make(tool_listing="xml", unsupported="maybe", user_sim=42)
    text = str(err.value)
    assert "tool_listing" in text and "unsupported" in text and "user_sim" in text


def test_json_tool_listing(problems: list[Problem]) -> None:
    prompt = ToolUseTask(tool_listing="json").prompt(problems[0])
    assert '{"type": "function", "function": {"name": "cancel_pending_order"' in prompt


def test_cli_eval_reports_pass_hat(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "eval",
            TASK_ID,
            "--policy",
            "scripted",
            "--k",
            "4",
            "--pass-hat",
            "--problems",
            "12",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"pass\^4\s*│\s*1\.000", out), out
