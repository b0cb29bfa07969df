"""Per-agent agent actors on Ray (``runner.agents: ray``): every trainable agent's model,
optimizer and trust-region backtracking live in its own actor, the numbers equal local training,
and an agent actor that dies costs a replay of its stage, nothing else."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers_skip import skip_module_without

skip_module_without("ray")

from helpers_trainers import BuiltTrainers, small  # noqa: E402
from rich.console import Console  # noqa: E402

from trainers.learners.callbacks import Callback  # noqa: E402
from trainers.learners.team_trainer import TeamTrainer  # noqa: E402
from trainers.placement.agents import ActorAgent  # noqa: E402
from trainers.placement.updaters import ActorPolicy, RayUpdater  # noqa: E402
from trainers.run import rundir  # noqa: E402
from trainers.run.recipe import run_training  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")

# A quarter CPU per agent actor: three fit beside the test process on the two-CPU local Ray.
ON_RAY = {"runner__agents": "ray", "runner__agent_cpus": 0.25}


@pytest.fixture(autouse=True)
def _ray(local_ray: None) -> None:
    """The session's local two-CPU Ray (tests/conftest.py)."""


def _same_numbers(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for when in ("before", "after"):
        keys = [k for k in theirs[when] if k.startswith("eval/")]
        assert keys
        for key in keys:
            assert ours[when][key] == pytest.approx(theirs[when][key], abs=1e-6), key
    assert len(ours["updates"]) == len(theirs["updates"])
    for mine, other in zip(ours["updates"], theirs["updates"], strict=True):
        assert (mine["stage"], mine["agent"], mine["accepted"]) == (
            other["stage"],
            other["agent"],
            other["accepted"],
        )
        for key in ("kl_tok", "l_seq", "backtracks", "step_scale"):
            assert mine[key] == pytest.approx(other[key], rel=1e-4, abs=1e-6, nan_ok=True), key


@pytest.fixture
def driver_only_task() -> Any:
    """The one-digit sums under an id registered in this process only: Ray's processes do not
    know it."""
    import teamtr_env

    task_id = "test/ArithHereOnly-v0"
    teamtr_env.register(task_id, "tasks.arith:ArithTask", kwargs={"digits": 1}, override=True)
    try:
        yield task_id
    finally:
        teamtr_env.registry.unregister(task_id)


@pytest.mark.slow  # two whole HF trainings; agent actors' numbers equal local training (tabular team, with rollout workers) in test_rollout_workers_get_the_agent_actors_weights_through_the_object_store
def test_agent_actors_train_like_local_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver_only_task: str
) -> None:
    """The numbers of local training; and the actors build their models without making an
    environment, so a task registered only in the driver's session trains with them."""
    quiet = Console(file=io.StringIO())
    task = {"task": driver_only_task}
    local = run_training(small(tmp_path / "local", **task), console=quiet)
    built = BuiltTrainers(monkeypatch)
    remote = run_training(small(tmp_path / "ray", **task, **ON_RAY), console=quiet)
    _same_numbers(remote, local)
    (trainer,) = built.trainers
    for slot in trainer.slots.values():  # the driver holds no optimizer state
        assert isinstance(slot, ActorAgent) and isinstance(slot.updater, RayUpdater)
        with pytest.raises(AttributeError, match="optimizer"):
            _ = slot.optimizer  # type: ignore[attr-defined]  # only a LocalAgent has one
    # The checkpoints hold what a local run's hold (the actors' optimizer state included).
    slots = {
        run: rundir.load(tmp_path / run / "checkpoints").state["trainer"]["slots"]  # type: ignore[union-attr]
        for run in ("local", "ray")
    }
    for agent, slot in slots["ray"].items():
        assert slot.keys() == slots["local"][agent].keys()
        assert (
            slot["optimizer"]["state"].keys() == slots["local"][agent]["optimizer"]["state"].keys()
        )
    _shut_down(trainer)


def _shut_down(trainer: TeamTrainer) -> None:
    for slot in trainer.slots.values():
        assert isinstance(slot.updater, RayUpdater)
        slot.updater.shutdown()


def _refuse_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes loading a model in this (the driver's) process an error; the actors' processes
    load theirs as usual."""
    from adapters.hf import HFPolicy
    from adapters.shared_lora import SharedLoraBase

    def refuse(cls: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the driver loaded a model ({cls.__name__}.from_pretrained)")

    for cls in (HFPolicy, SharedLoraBase):
        monkeypatch.setattr(cls, "from_pretrained", classmethod(refuse))


@pytest.mark.slow  # two whole runs on Ray (about 50 s): make test-all
def test_with_ray_rollout_workers_too_the_driver_loads_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Learner actors and Ray rollout workers: the actors build their models, clone the expert
    and score; the workers play every rollout and evaluation (validation and the best team's
    reload included); the driver holds only ActorPolicy handles and never loads a model. The
    numbers equal the same run with its updates in the driver."""
    quiet = Console(file=io.StringIO())
    settings = {
        "runner__backend": "ray",
        "runner__workers": 1,
        "runner__num_cpus": 0.25,
        "eval__every": 1,
        "eval__select": "best_validation",
        "sft_shared": False,  # each actor clones its own agent, all at once
    }
    in_driver = run_training(small(tmp_path / "driver", **settings), console=quiet)
    _refuse_models(monkeypatch)
    built = BuiltTrainers(monkeypatch)
    remote = run_training(small(tmp_path / "actors", **settings, **ON_RAY), console=quiet)
    _same_numbers(remote, in_driver)
    validation = {  # after every stage, on the workers
        run: [
            row["val/avg@2"]
            for row in map(json.loads, (tmp_path / run / "metrics.jsonl").open())
            if "val/avg@2" in row
        ]
        for run in ("driver", "actors")
    }
    assert len(validation["actors"]) == 2
    assert validation["actors"] == pytest.approx(validation["driver"], abs=1e-6)
    (trainer,) = built.trainers
    assert all(isinstance(p, ActorPolicy) for p in trainer.policies.values())
    assert not any(list(p.parameters()) for p in trainer.policies.values())
    _shut_down(trainer)
    trainer.runner.shutdown()  # type: ignore[attr-defined]


@pytest.mark.slow  # agent actors equal local training in test_agent_actors_train_like_local_training; a shared-base team equals separate copies in tests/adapters/test_shared_lora.py
def test_a_shared_base_lora_team_trains_in_agent_actors_as_in_the_driver(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared-base LoRA team with an agent actor per agent (each actor holds the base once
    and its agent's adapter): each agent built alone in its actor starts from the adapter it
    gets in the whole team, and the run's numbers equal the run in one process."""
    quiet = Console(file=io.StringIO())
    team = {
        "shared_base": True,
        "default": {"backend": "hf", "path": str(tiny_model_dir), "lora": {"r": 4, "alpha": 32}},
    }
    settings = {"team": team, "sft": None, "trust_region__beta": 0.05, "optim__lr": 0.01}
    local = run_training(small(tmp_path / "local", **settings), console=quiet)
    _refuse_models(monkeypatch)
    built = BuiltTrainers(monkeypatch)
    remote = run_training(small(tmp_path / "ray", **settings, **ON_RAY), console=quiet)
    _same_numbers(remote, local)
    assert [r for r in remote["updates"] if r["kl_tok"] > 1e-6], "no update moved"
    for ours, theirs in zip(remote["updates"], local["updates"], strict=True):
        assert ours["ref_kl"] == pytest.approx(theirs["ref_kl"], rel=1e-4, abs=1e-6, nan_ok=True)
    found = rundir.load(tmp_path / "ray" / "checkpoints")
    assert found is not None
    for slot in found.state["trainer"]["slots"].values():  # adapters only
        assert slot["policy"] and all("lora_" in key for key in slot["policy"])
    _shut_down(built.trainers[-1])


class _KillOnce(Callback):
    """Kills ``agent``'s agent actor after the first update of stage ``stage`` (0-based)."""

    def __init__(self, built: BuiltTrainers, agent: str, stage: int) -> None:
        self.built, self.agent, self.stage, self.killed = built, agent, stage, False

    def on_update(self, record: Any) -> None:
        if record.stage == self.stage and not self.killed:
            updater = self.built.trainers[-1].slots[self.agent].updater
            assert isinstance(updater, RayUpdater)
            import ray

            ray.kill(updater.actor, no_restart=True)
            self.killed = True


@pytest.mark.slow  # two whole runs on Ray (about 50 s): make test-all
def test_a_dead_agent_actor_costs_a_replay_of_its_stage_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet = Console(file=io.StringIO())
    whole = run_training(small(tmp_path / "whole"), console=quiet)
    built = BuiltTrainers(monkeypatch)
    killer = _KillOnce(built, "aggregator", stage=1)
    out = io.StringIO()
    config = small(tmp_path / "killed", **ON_RAY)
    summary = run_training(config, console=Console(file=out, width=200), callbacks=[killer])
    assert killer.killed
    text = " ".join(out.getvalue().split())
    assert "the agent actor of agent 'aggregator' died" in text
    assert "replaying stage 2 (restart 1 of at most 3)" in text
    _same_numbers(summary, whole)  # nothing lost, nothing counted twice
    steps = {
        run: [json.loads(row)["step"] for row in (tmp_path / run / "metrics.jsonl").open()]
        for run in ("whole", "killed")
    }
    assert steps["killed"] == steps["whole"]  # every stage logged once
    assert len(summary["updates"]) == 2 * 3
    _shut_down(built.trainers[-1])


def test_agent_actors_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    from teamtr_core.errors import ConfigError

    config = small(tmp_path / "big", runner__agents="ray", runner__agent_cpus=64)
    with pytest.raises(ConfigError, match="agent actors x 64 CPUs"):
        run_training(config, console=Console(file=io.StringIO()))


def test_agent_actors_on_cuda_without_gpus_are_refused_before_anything_starts(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from teamtr_core.errors import ConfigError

    team = {"default": {"backend": "hf", "path": str(tiny_model_dir), "device": "cuda"}}
    config = small(tmp_path / "gpu", team=team, runner__agents="ray")
    with pytest.raises(ConfigError, match=r"agents.solver.device is 'cuda'.*runner.agent_gpus"):
        run_training(config, console=Console(file=io.StringIO()))
    assert not (tmp_path / "gpu").exists()  # refused before the run directory is written


@pytest.mark.slow
def test_teamtr_train_with_agent_actors_from_the_cli(tmp_path: Path) -> None:
    """The demo team (tiny models, behaviour cloning, TeamTR) with an agent actor per agent
    equals the same run trained in one process."""
    from teamtr_cli import main

    sets = [
        "sft.steps=30",
        "schedule.stages=2",
        "schedule.problems_per_batch=4",
        "schedule.group_size=2",
        "eval.problems=16",
        "eval.k=2",
        "eval.train_distribution=false",
        "progress=false",
        "loggers=[]",
        "plot=false",
    ]
    argv = [arg for item in sets for arg in ("--set", item)]
    assert main(["train", *argv, "--run-dir", str(tmp_path / "local")]) == 0
    ray_sets = ["--set", "runner.agents=ray", "--set", "runner.agent_cpus=0.25"]
    assert main(["train", *argv, *ray_sets, "--run-dir", str(tmp_path / "ray")]) == 0
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    remote = json.loads((tmp_path / "ray" / "summary.json").read_text())
    _same_numbers(remote, local)


def test_rollout_workers_get_the_agent_actors_weights_through_the_object_store() -> None:
    """Learner actors and Ray rollout workers together: the workers play each update's weights
    (sent from the actor, never through the driver), and the team ends where local training
    ends. One trainable agent beside a fixed one: one agent actor and one worker (each a
    process start; several agents' actors in test_agent_actors_train_like_local_training)."""
    import torch
    from helpers_trainers import config, env_fn, tabular_team

    from adapters.scripted import ConstantPolicy

    def team() -> dict[str, Any]:
        return {"a": tabular_team()["a"], "b": ConstantPolicy("Answer: 1")}

    settings = {"schedule__stages": 2, "schedule__learner": "teamtr", "diagnostics": False}
    local = TeamTrainer(config(**settings), env_fn, team())
    remote_config = config(
        **settings,
        runner__backend="ray",
        runner__workers=1,
        runner__num_cpus=0.25,
        runner__agents="ray",
        runner__agent_cpus=0.25,
    )
    remote = TeamTrainer(remote_config, env_fn, team())
    reports = []
    for _ in range(2):
        local.run_stage()
        reports.append(remote.run_stage())
    train = [e for r in reports for e in r.samples if e.purpose == "train"]
    assert list(remote.slots) == ["a"] and len(train) == 2
    for event in train:  # the workers played the team of that moment
        assert event.worker_versions == event.versions
    for agent, slot in remote.slots.items():
        assert isinstance(slot.updater, RayUpdater)
        torch.testing.assert_close(slot.policy.logits, local.slots[agent].policy.logits)
        actor_weights = slot.updater.weights()
        for key, value in slot.policy.state_dict().items():
            torch.testing.assert_close(actor_weights[key], value)
        slot.updater.shutdown()
    remote.runner.shutdown()  # type: ignore[attr-defined]
