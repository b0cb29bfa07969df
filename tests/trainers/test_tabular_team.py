"""Tabular teams through the real stack (``backend: tabular`` in a team config): the task's states
and messages, one random table per agent and run seed, clear errors, and the exact expected
reward J that evaluations report beside the sampled avg@K (checked against the exact relay game of
trainers/exact and against sampling)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import teamtr_env
from adapters.tabular import TabularPolicy
from adapters.team import MAX_TABLE_ENTRIES, build_team, team_config_from_dict
from tasks.capabilities import NO_STATE, SupportsExactReward, SupportsTabular
from teamtr_core.config import from_dict
from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams
from trainers.config import TrainConfig
from trainers.exact.games import RelayGame, expected_return
from trainers.run.team_eval import evaluate_team, exact_team_reward

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "benchmarks" / "configs" / "relay_tabular.yaml"
AGENTS = ("a1", "a2", "a3", "a4")
TABULAR = {"default": {"backend": "tabular", "init": "random"}}


def relay_env(**options):
    return teamtr_env.make("teamtr/Relay-v0", symbols=4, agents=list(AGENTS), **options)


def test_relay_and_convention_declare_their_states_and_messages() -> None:
    relay = relay_env().task
    assert isinstance(relay, SupportsTabular) and isinstance(relay, SupportsExactReward)
    assert relay.tabular_states() == ["0", "1", "2", "3", NO_STATE]
    assert relay.tabular_messages() == ["m0", "m1", "m2", "m3"]
    assert relay.tabular_state("### a1\nsecret 2\n") == "2"
    assert relay.tabular_state("m3") == "3" and relay.tabular_state("m9") == NO_STATE
    assert relay.tabular_state("no symbol here") == NO_STATE
    convention = teamtr_env.make("teamtr/Convention-v0", length=2).task
    assert len(convention.tabular_messages()) == 26**2
    assert convention.tabular_states()[-1] == NO_STATE
    assert convention.tabular_state("secret kq") == "kq"


def test_the_exact_reward_is_the_exact_games_j() -> None:
    relay = relay_env().task
    rng = np.random.default_rng(0)
    for turns in (4, 8):  # one round and two
        tables = [rng.dirichlet(np.ones(4), size=5) for _ in AGENTS]  # the "none" row too
        game = RelayGame(n=4, symbols=4, rounds=turns // 4)
        want = expected_return(game, [t[:4] for t in tables])
        assert relay.exact_reward(tables, turns) == pytest.approx(want, abs=1e-12)
    identity = [np.vstack([np.eye(4), np.full(4, 0.25)])] * 4
    assert relay.exact_reward(identity, 4) == pytest.approx(1.0)
    assert relay.exact_reward([np.full((5, 4), 0.25)] * 4, 4) == pytest.approx(0.25)


def test_a_tabular_team_gets_one_random_table_per_agent_and_run_seed() -> None:
    config = team_config_from_dict(TABULAR)
    task = relay_env().task
    team, _ = build_team(config, AGENTS, task, init_seed=11)
    again, _ = build_team(config, AGENTS, task, init_seed=11)
    other, _ = build_team(config, AGENTS, task, init_seed=12)
    assert all(isinstance(p, TabularPolicy) for p in team.values())
    assert team["a1"].states == tuple(task.tabular_states())
    tables = [team[a].logits for a in AGENTS]
    assert not torch.equal(tables[0], tables[1])  # each agent its own draw
    for a in AGENTS:
        torch.testing.assert_close(team[a].logits, again[a].logits)  # the same seed, the same team
        assert not torch.equal(team[a].logits, other[a].logits)
    # an agent built alone (an agent actor) starts as it does in the whole team
    alone, _ = build_team(config, AGENTS, task, only=["a3"], init_seed=11)
    torch.testing.assert_close(alone["a3"].logits, team["a3"].logits)


def test_tabular_config_errors_are_listed_at_once() -> None:
    arith_env = teamtr_env.make("teamtr/Arith-v0")
    arith = arith_env.task
    with pytest.raises(ConfigError) as info:
        build_team(team_config_from_dict(TABULAR), arith_env.possible_agents, arith)
    assert "needs states and messages" in str(info.value)
    words = teamtr_env.make("teamtr/Convention-v0").task  # 3 letters: 17,576 x 17,576
    with pytest.raises(ConfigError, match=f"over the limit of {MAX_TABLE_ENTRIES:,}"):
        build_team(team_config_from_dict(TABULAR), ["a1", "a2", "a3"], words)
    bad = {
        "agents": {
            "a1": {"backend": "tabular", "states": ["x", "x"], "messages": ["m0"]},
            "a2": {"backend": "constant", "states": ["x"]},
        },
        "default": {"backend": "tabular"},
    }
    with pytest.raises(ConfigError) as info:
        build_team(team_config_from_dict(bad), ["a1", "a2", "a3"], arith)
    text = str(info.value)
    assert "agents.a1.states: must be non-empty and distinct" in text
    assert "agents.a2: states/messages need backend 'tabular'" in text
    assert "agents.a3: backend 'tabular' needs states and messages" in text


def test_exact_j_matches_the_sampled_average_of_a_random_team() -> None:
    """The evaluation's exact J against its own sampled avg@K on many episodes: the estimator and
    the exact value agree within sampling error (and ``None`` where J is not exact)."""
    base = from_dict(
        TrainConfig,
        {
            "task": "teamtr/Relay-v0",
            "task_options": {"symbols": 4, "agents": list(AGENTS)},
            "team": TABULAR,
            "sampling": {"temperature": 1.0},
            "eval": {"problems": 800, "k": 4},
            "sft": None,
        },
    )
    team, _ = build_team(base.team, AGENTS, relay_env().task, init_seed=3)
    env_fn = functools.partial(relay_env)
    metrics = evaluate_team(base, env_fn, team)
    exact = metrics["eval/exact_J"]
    assert 0.05 < exact < 0.95
    # 800 problems x 4 samples: the standard error is at most 0.009 (0.25 / 4 per problem)
    assert abs(metrics["eval/avg@4"] - exact) < 0.035, (metrics["eval/avg@4"], exact)
    sampling = dict.fromkeys(AGENTS, SamplingParams(temperature=1.0))
    assert exact_team_reward(relay_env(), team, sampling) == pytest.approx(exact)
    # at temperature 0 the team is greedy: J is 0 or 1 per secret
    greedy = dict.fromkeys(AGENTS, SamplingParams(temperature=0.0))
    assert exact_team_reward(relay_env(), team, greedy) in {0.0, 0.25, 0.5, 0.75, 1.0}
    # not the exact game: another visibility, truncated sampling
    assert exact_team_reward(relay_env(visibility="all"), team, sampling) is None
    top_k = dict.fromkeys(AGENTS, SamplingParams(temperature=1.0, top_k=2))
    assert exact_team_reward(relay_env(), team, top_k) is None


def test_teamtr_train_runs_the_benchmark_config_and_reports_exact_j(tmp_path: Path) -> None:
    from teamtr_cli import main

    run = tmp_path / "run"
    argv = ["train", "--config", str(CONFIG), "--run-dir", str(run)]
    for item in ("schedule.stages=2", "eval.problems=64", "progress=false", "loggers=[]"):
        argv += ["--set", item]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert 0 < summary["before"]["eval/exact_J"] < 1
    assert summary["after"]["eval/exact_J"] > summary["before"]["eval/exact_J"]
    assert len(summary["updates"]) == 2 * len(AGENTS)


@pytest.mark.slow  # a docs command line (the docs' lines run in the slow set); teamtr compare's table in tests/cli/test_cli_compare.py
def test_the_compare_benchmark_line_of_the_docs_runs(tmp_path: Path) -> None:
    """docs/compare.md's benchmark line, verbatim but for two seeds, two stages and the output
    folder: every learner's exact J is paired by seed against TeamTR's."""
    import re
    import shlex

    from teamtr_cli import main

    text = (ROOT / "docs" / "compare.md").read_text(encoding="utf-8")
    (line,) = [x for x in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "relay_tabular" in x]
    line = line.strip().replace("$(seq 0 31)", "0 1").replace("benchmarks/", f"{ROOT}/benchmarks/")
    argv = shlex.split(line)[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "cmp")
    argv += ["--set", "schedule.stages=2", "--set", "progress=false"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert len(data["learners"]) == 4
    for entry in data["paired"]:
        assert len(entry["exact"]["per_seed"]) == 2
    assert "Exact J of the trained tabular team" in (tmp_path / "cmp" / "compare.md").read_text()
