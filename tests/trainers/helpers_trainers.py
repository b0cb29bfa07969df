"""Small exact teams for trainer tests: tabular policies on a fixed arithmetic problem."""

from __future__ import annotations

from typing import Any

import teamtr_env
from adapters.tabular import TabularPolicy
from tasks import Problem
from teamtr_env.config import from_dict
from trainers.config import TrainConfig

MESSAGES = ["Answer: 1", "Answer: 2", "Answer: 3"]
PROBLEMS = [Problem(id="one", data={"expression": "0 + 1"}, answer=1)]


def env_fn(agents: tuple[str, ...] = ("a", "b")) -> Any:
    return teamtr_env.make("teamtr/Arith-v0", agents=list(agents), problems=PROBLEMS)


def tabular_team(agents: tuple[str, ...] = ("a", "b"), seed: int = 0) -> dict[str, TabularPolicy]:
    return {
        name: TabularPolicy(
            ["any"], MESSAGES, featurize=lambda c: "any", init="random", seed=seed + i
        )
        for i, name in enumerate(agents)
    }


def config(**overrides: Any) -> TrainConfig:
    data: dict[str, Any] = {
        "sampling": {"temperature": 1.0},
        "sft": None,
        "diagnostics": True,
        "progress": False,
        "schedule": {"stages": 2, "problems_per_batch": 4, "group_size": 4},
        "optim": {"lr": 0.05, "epochs": 2},
        "trust_region": {"delta": 0.05},
        "eval": {"problems": 4, "k": 2},
    }
    return from_dict(TrainConfig, with_overrides(data, overrides))


def with_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``section__field=value`` sets ``data[section][field]``; a plain key sets ``data[key]``."""
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        if field:
            data.setdefault(section, {})[field] = value
        else:
            data[section] = value
    return data
