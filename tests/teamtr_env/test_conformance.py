"""PettingZoo conformance of every registered task (api_test and seed_test), at several team sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pettingzoo.test import api_test, seed_test

import teamtr_env
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


def test_registry_is_not_empty() -> None:
    assert "teamtr/Arith-v0" in ALL_IDS


@pytest.mark.parametrize("task_id", ALL_IDS)
def test_api_test_every_registered_task(task_id: str) -> None:
    api_test(teamtr_env.make(task_id, max_message_chars=300), num_cycles=30)


@pytest.mark.parametrize("task_id", ALL_IDS)
def test_seed_test_every_registered_task(task_id: str) -> None:
    seed_test(lambda: teamtr_env.make(task_id, max_message_chars=300), num_cycles=20)


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
