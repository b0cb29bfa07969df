"""Training on Ray: every rollout comes from the trainer's current team (weights synced after each
update, never a stale replica), and teamtr train runs on Ray from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_skip import skip_module_without
from helpers_trainers import config, env_fn, tabular_team

from teamtr_env.runners import RayRunner
from trainers.learners.team_trainer import TeamTrainer

skip_module_without("ray")

# One worker of a parallel run (pytest -n, make test) holds the session's local Ray.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(autouse=True)
def _ray(local_ray: None) -> None:
    """The session's local two-CPU Ray (tests/conftest.py)."""


@pytest.mark.slow  # a whole TeamTR run on rollout workers; the workers play each update's team (worker_versions == versions) in test_ray_learners.py's test_rollout_workers_get_the_agent_actors_weights_through_the_object_store
def test_teamtr_on_ray_samples_every_update_from_the_team_after_the_previous_one() -> None:
    cfg = config(
        schedule__stages=2,
        schedule__learner="teamtr",
        diagnostics=False,
        runner__backend="ray",
        runner__workers=2,
    )
    trainer = TeamTrainer(cfg, env_fn, tabular_team())
    assert isinstance(trainer.runner, RayRunner)
    reports = [trainer.run_stage() for _ in range(2)]
    train = [e for r in reports for e in r.samples if e.purpose == "train"]
    assert len(train) == 4
    for event in train:  # what the workers played is the trainer's team at that moment
        assert event.worker_versions == event.versions
    assert train[1].versions["a"] == train[0].versions["a"] + 1  # after update 0, never before
    trainer.runner.shutdown()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_teamtr_train_on_ray_from_the_cli(tmp_path: Path) -> None:
    from teamtr_cli import main

    run = tmp_path / "run"
    argv = [
        "train",
        "--run-dir",
        str(run),
        "--set",
        "runner.backend=ray",
        "--set",
        "runner.workers=2",
    ]
    small = [
        "sft.steps=2",
        "schedule.stages=1",
        "schedule.problems_per_batch=2",
        "schedule.group_size=2",
        "eval.problems=4",
        "eval.k=2",
        "eval.train_distribution=false",
        "progress=false",
        "loggers=[]",
    ]
    for item in small:
        argv += ["--set", item]
    assert main(argv) == 0
    assert (run / "summary.json").exists()


@pytest.mark.parametrize(
    "placement",
    [
        # both slow: the record's engine syncs are a local run's too (test_rollout_engine.py)
        pytest.param(
            {"runner__backend": "ray", "runner__workers": 1, "runner__num_cpus": 0.25},
            marks=pytest.mark.slow,
        ),
        # agent actors' syncs: the same record path, and agent actors train in
        # test_ray_learners.py's fast test
        pytest.param({"runner__agents": "ray", "runner__agent_cpus": 0.25}, marks=pytest.mark.slow),
    ],
    ids=["rollout-workers", "agent-actors"],
)
def test_engine_syncs_on_ray_are_reported_in_the_stage_record(placement: dict) -> None:
    """Rollout engines on Ray rollout workers or in agent actors sync there; their syncs come
    back to the stage record (``rollout/sync_*``) and are the syncs the same run makes with its
    engines in the driver (the stand-in engine of tests/trainers/test_rollout_engine.py)."""
    from test_rollout_engine import AGENTS, engine_team

    from trainers.placement.updaters import RayUpdater

    settings = {"schedule__learner": "teamtr", "diagnostics": False}

    def stage_metrics(cfg) -> list[dict]:
        policies, _ = engine_team()
        trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), policies)
        try:
            return [trainer.run_stage().metrics for _ in range(2)]
        finally:
            for slot in trainer.slots.values():
                if isinstance(slot.updater, RayUpdater):
                    slot.updater.shutdown()
            shutdown = getattr(trainer.runner, "shutdown", None)
            if callable(shutdown):
                shutdown()

    local = stage_metrics(config(**settings))
    remote = stage_metrics(config(**settings, **placement))
    for here, there in zip(local, remote, strict=True):
        assert there["rollout/sync_count"] == here["rollout/sync_count"] > 0
        assert there["rollout/sync_bytes"] == here["rollout/sync_bytes"] > 0
