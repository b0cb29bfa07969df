"""The training configs of benchmarks/configs load and build their task's environment (a config
that rots would only fail an hour into a benchmark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainers.run.config_file import load_train_config
from trainers.run.recipe import env_factory

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_a_benchmark_config_loads_and_builds_its_environment(path: Path) -> None:
    config = load_train_config(path)
    env = env_factory(config, "test")()
    assert env.possible_agents
    if path.name == "convention8.yaml":
        assert len(env.possible_agents) == 8 and config.trust_region.adapt_beta is False


def test_there_are_benchmark_configs() -> None:
    assert {p.name for p in CONFIGS} >= {"convention.yaml", "convention8.yaml"}
