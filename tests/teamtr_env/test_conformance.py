"""PettingZoo conformance of every registered task (api_test and seed_test), at several team sizes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from pettingzoo.test import api_test, seed_test

import teamtr_env
from tasks.reasoning_gym.catalogue import NO_DEFAULT_BUILD as NO_DEFAULT_BUILD_RG
from teamtr_core.errors import ConfigError
from teamtr_env.registration import Registry

# PettingZoo's checker recommends numeric spaces and 'player_0' names; a text team deliberately has
# text spaces and role names, so these advisory warnings are expected and silenced here.
ADVISORY = (
    "Observation space for each agent probably",
    "Action space for each agent probably",
    "We recommend agents to be named",
    "Observation is not a NumPy array",
)


pytestmark = [
    pytest.mark.filterwarnings("error"),  # any other warning from the checkers is a real finding
    *(pytest.mark.filterwarnings(f"ignore:{text}") for text in ADVISORY),
]


ALL_IDS = sorted(teamtr_env.registry)
# reasoning-gym ids that cannot be made with default options, and why (docs/tasks/reasoning_gym.md).
NO_DEFAULT_BUILD = {f"reasoning_gym/{name}-v0": why for name, why in NO_DEFAULT_BUILD_RG.items()}
# ids that cannot run on this machine, with the reason `teamtr tasks` shows (TextArena games whose
# source needs a newer Python or nltk downloads; tests/tasks/textarena checks the reasons)
NO_DEFAULT_BUILD["openenv/Env-v0"] = "needs url or env (tests/tasks/test_openenv_task.py checks it)"
NO_DEFAULT_BUILD |= {
    task_id: why
    for task_id in ALL_IDS
    if (why := teamtr_env.registry[task_id].unavailable_reason()) is not None
}
# `make test` checks these reasoning-gym ids (plain, multi-line answers, no reference answer);
# `make test-all` and CI check all 105, those built up front (acre) and the slow generators
# (knight_swap: 4.5 s) too.
FAST_REASONING_GYM = {
    f"reasoning_gym/{name}-v0" for name in ("basic_arithmetic", "arc_1d", "propositional_logic")
}


def _every_id() -> list[Any]:
    """Every id that builds with default options; the reasoning-gym ids outside
    :data:`FAST_REASONING_GYM` are slow tests (105 of them take about a minute)."""
    missing = pytest.mark.skip(reason="reasoning-gym is not installed (the [reasoning-gym] extra)")
    ids: list[Any] = []
    for task_id in ALL_IDS:
        if task_id in NO_DEFAULT_BUILD:
            continue
        marks = []
        if task_id.startswith("reasoning_gym/"):
            if task_id not in FAST_REASONING_GYM:
                marks.append(pytest.mark.slow)
            if importlib.util.find_spec("reasoning_gym") is None:
                marks.append(missing)
        ids.append(pytest.param(task_id, marks=marks))
    return ids


EVERY_ID = _every_id()


def test_registry_is_not_empty() -> None:
    assert "teamtr/Arith-v0" in ALL_IDS
    assert len(EVERY_ID) == len(ALL_IDS) - len(NO_DEFAULT_BUILD)


@pytest.mark.parametrize("task_id", EVERY_ID)
def test_api_test_every_registered_task(task_id: str) -> None:
    api_test(teamtr_env.make(task_id, max_message_chars=300), num_cycles=30)


@pytest.mark.parametrize("task_id", EVERY_ID)
def test_seed_test_every_registered_task(task_id: str) -> None:
    seed_test(lambda: teamtr_env.make(task_id, max_message_chars=300), num_cycles=20)


COMPOSITE = [{"name": "chain_sum", "weight": 1, "config": {}}, {"name": "gcd", "weight": 2}]


def test_the_ids_that_need_options_pass_with_them() -> None:
    """composite has no default (it mixes the datasets it is given)."""
    pytest.importorskip("reasoning_gym")
    with pytest.raises(ConfigError, match="Must specify at least one dataset"):
        teamtr_env.make("reasoning_gym/composite-v0")
    make = lambda: teamtr_env.make(  # noqa: E731
        "reasoning_gym/composite-v0", datasets=COMPOSITE, max_message_chars=300
    )
    api_test(make(), num_cycles=30)
    seed_test(make, num_cycles=20)


@pytest.mark.parametrize("n_agents", [1, 2, 5])
def test_api_test_team_sizes(n_agents: int) -> None:
    agents = [f"agent_{i}" for i in range(n_agents)]
    api_test(teamtr_env.make("teamtr/Arith-v0", agents=agents, max_turns=2 * n_agents), 30)
    seed_test(lambda: teamtr_env.make("teamtr/Arith-v0", agents=agents), num_cycles=10)


@pytest.mark.parametrize(
    "name", ["single", "self_consistency", "debate", "debate_judge", "role_play"]
)
def test_api_test_inference_protocols(name: str) -> None:
    from teamtr_env.baselines import build_protocol

    proto = build_protocol(name, budget_kind="samples", budget=4)
    api_test(teamtr_env.make("teamtr/Arith-v0", **proto.env_kwargs), num_cycles=10)


CAPITALS = Path(__file__).resolve().parents[1] / "fixtures" / "dataset" / "capitals.jsonl"


def _dataset_registry() -> Registry:
    """A DatasetTask registered as a user would (import strings, so a YAML config could name
    the reward), in a registry of its own so the default one stays as shipped."""
    registry = Registry(plugins=False)
    registry.register(
        "test/Capitals-v0",
        "tasks.dataset:DatasetTask",
        kwargs={
            "path": str(CAPITALS),
            "prompt_column": "question",
            "id_column": "id",
            "reward_funcs": ["tasks.dataset.rewards:exact_match"],
            "reward_weights": [1.0],
        },
    )
    return registry


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_api_and_seed_test_a_registered_dataset_task(split: str) -> None:
    registry = _dataset_registry()
    env = registry.make("test/Capitals-v0", split=split, max_message_chars=300)
    api_test(env, num_cycles=30)
    seed_test(lambda: registry.make("test/Capitals-v0", split=split), num_cycles=20)
