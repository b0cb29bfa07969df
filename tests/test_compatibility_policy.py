"""The one compatibility policy of CHANGELOG.md: no shims in the packages, every renamed config key
listed with its replacement, and the removed names gone."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("teamtr_core", "tasks", "teamtr_env", "adapters", "trainers", "teamtr_cli")
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def _config_classes() -> list[type]:
    """Every config dataclass that declares renamed keys."""
    from adapters.team import AgentPolicyConfig
    from trainers.config import ScheduleConfig, TrainConfig

    return [AgentPolicyConfig, ScheduleConfig, TrainConfig]


def test_the_packages_keep_no_deprecation_shims() -> None:
    """A renamed public name stops working in the release that renames it: nothing in the
    packages warns that an old name still works."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b(FutureWarning|DeprecationWarning)\b", line)
    ]
    assert found == []


def test_every_renamed_config_key_is_in_the_changelog_with_its_replacement() -> None:
    for cls in _config_classes():
        for old, new in vars(cls).get("_renamed_keys", {}).items():
            moved = new.items() if isinstance(new, dict) else [(None, new)]
            for key, target in moved:
                name = old if key is None else f"{old}.{key}"
                line = next((ln for ln in CHANGELOG.splitlines() if f"`{name}`" in ln), "")
                if not line:  # a key listed with its section's prefix
                    line = next((ln for ln in CHANGELOG.splitlines() if name in ln), "")
                assert target.split(".")[-1] in line, f"{cls.__name__}: {name} -> {target}"


@pytest.mark.parametrize(
    ("module", "replacement"),
    [
        ("teamtr_env.runner", "teamtr_env.runners"),
        ("teamtr_env.ray_runner", "teamtr_env.runners.ray"),
        ("trainers.recipe", "trainers.run.recipe"),
        ("trainers.team_trainer", "trainers.learners.team_trainer"),
        ("trainers.updaters", "trainers.placement.updaters"),
    ],
)
def test_a_removed_module_is_gone_and_its_replacement_is_in_the_changelog(
    module: str, replacement: str
) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)
    importlib.import_module(replacement)
    assert f"`{replacement}" in CHANGELOG
    tail = module.rsplit(".", 1)[-1]
    assert f"`{module}`" in CHANGELOG or f"`{tail}`" in CHANGELOG


def test_a_config_of_0_1_0_is_refused_with_every_new_key_named() -> None:
    """A run directory's config.yaml of the previous version: each moved key is named."""
    from teamtr_core.config import from_dict
    from teamtr_core.errors import ConfigError
    from trainers.config import TrainConfig

    old = {
        "schedule": {"method": "joint"},
        "trainer": {"backend": "ray", "num_cpus": 0.5},
        "temperature": 0.7,
    }
    with pytest.raises(ConfigError) as err:
        from_dict(TrainConfig, old)
    assert set(err.value.errors) == {
        "temperature was renamed to sampling.temperature",
        "trainer.backend was renamed to runner.agents",
        "trainer.num_cpus was renamed to runner.agent_cpus",
        "schedule.method was renamed to schedule.learner",
    }
    with pytest.raises(ConfigError, match=r"trainer was removed: its keys are now runner.agents"):
        from_dict(TrainConfig, {"trainer": {}})


def test_the_placement_is_one_section() -> None:
    """Rollout workers and agent actors are placed by ``runner`` alone (one Ray address)."""
    from trainers.config import RunnerConfig, TrainConfig

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    assert "runner" in names and "trainer" not in names
    runner = {f.name for f in dataclasses.fields(RunnerConfig)}
    assert {"backend", "address", "agents", "agent_cpus", "agent_gpus", "max_restarts"} <= runner
