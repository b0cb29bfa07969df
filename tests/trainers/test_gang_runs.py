"""Sharded agents in whole runs (``runner.agent_shards: 2``: a gang of two agent actors per
agent, FSDP2 over gloo on a local Ray): a run trains as the same run in one process, its
checkpoints are an unsharded run's, an interrupted run resumes to the uninterrupted result, its
export equals the unsharded export, and a rank killed mid-run costs a replay of its stage."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers_skip import skip_module_without

skip_module_without("ray")

import torch  # noqa: E402
from helpers_trainers import BuiltTrainers, CrashAfter, SimulatedCrash, small  # noqa: E402
from rich.console import Console  # noqa: E402

from trainers.learners.callbacks import Callback  # noqa: E402
from trainers.placement.gang import GangUpdater  # noqa: E402
from trainers.run import rundir  # noqa: E402
from trainers.run.recipe import run_training  # noqa: E402

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.slow]

# A relay of two tiny-model agents that learns within two stages (behaviour cloning, then
# updates that backtrack); two ranks of a quarter CPU per agent: four actors on the local Ray.
RELAY = {
    "task": "teamtr/Relay-v0",
    "task_options": {"agents": ["a1", "a2"]},
    "sampling__max_new_tokens": 4,
    "sft__problems": 32,
    "sft__steps": 20,
    "sft__batch_size": 16,
    "schedule__problems_per_batch": 4,
    "schedule__group_size": 4,
    "optim__lr": 1e-3,
    "optim__micro_batch_size": 4,
    "trust_region__delta": 0.02,
    "eval__problems": 8,
    "eval__train_distribution": False,
}
GANG = {"runner__agents": "ray", "runner__agent_shards": 2, "runner__agent_cpus": 0.25}
QUIET = Console(file=io.StringIO())


@pytest.fixture(autouse=True)
def _ray(local_ray: None) -> None:
    """The session's local two-CPU Ray (tests/conftest.py)."""


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The relay trained in one process: the reference of every test here."""
    run_dir = tmp_path_factory.mktemp("local") / "run"
    return run_dir, run_training(small(run_dir, **RELAY), console=QUIET)


def _same_numbers(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for when in ("before", "after"):
        for key in [k for k in theirs[when] if k.startswith("eval/")]:
            assert ours[when][key] == pytest.approx(theirs[when][key], abs=1e-6), key
    assert len(ours["updates"]) == len(theirs["updates"]) == 4
    for mine, other in zip(ours["updates"], theirs["updates"], strict=True):
        for key in ("stage", "agent", "accepted", "reason", "backtracks"):
            assert mine[key] == other[key], key
        for key in ("kl_raw", "kl_tok", "l_seq", "step_scale"):
            assert mine[key] == pytest.approx(other[key], rel=1e-3, abs=1e-5, nan_ok=True), key
    assert any(u["backtracks"] for u in ours["updates"])  # the trust region was exercised


def _slots(run_dir: Path) -> dict[str, Any]:
    found = rundir.load(run_dir / "checkpoints")
    assert found is not None
    return dict(found.state["trainer"]["slots"])


def test_a_sharded_run_trains_as_one_process_does_and_checkpoints_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: tuple[Path, dict[str, Any]]
) -> None:
    built = BuiltTrainers(monkeypatch)
    summary = run_training(small(tmp_path / "gang", **RELAY, **GANG), console=QUIET)
    _same_numbers(summary, local[1])
    (trainer,) = built.trainers
    assert all(isinstance(slot.updater, GangUpdater) for slot in trainer.slots.values())
    assert all(len(slot.updater.ranks) == 2 for slot in trainer.slots.values())
    ours, theirs = _slots(tmp_path / "gang"), _slots(local[0])
    for agent, slot in theirs.items():  # whole tensors, as an unsharded run keeps them
        assert ours[agent].keys() == slot.keys()
        for name, value in slot["policy"].items():
            torch.testing.assert_close(ours[agent]["policy"][name], value, rtol=1e-3, atol=1e-4)
        assert ours[agent]["optimizer"]["state"].keys() == slot["optimizer"]["state"].keys()
        for index, state in slot["optimizer"]["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                mine = ours[agent]["optimizer"]["state"][index][key]
                assert mine.shape == state[key].shape
    built.shut_down()


def test_an_interrupted_sharded_run_resumes_to_the_uninterrupted_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: tuple[Path, dict[str, Any]]
) -> None:
    built = BuiltTrainers(monkeypatch)
    config = small(tmp_path / "gang", **RELAY, **GANG)
    with pytest.raises(SimulatedCrash):
        run_training(config, console=QUIET, callbacks=[CrashAfter(1)])
    built.shut_down()  # the crashed run's gangs
    resumed = run_training(config, resume=True, console=QUIET)
    _same_numbers(resumed, local[1])
    built.shut_down()


def test_the_export_of_a_sharded_run_equals_the_unsharded_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: tuple[Path, dict[str, Any]]
) -> None:
    from transformers import AutoModelForCausalLM

    from trainers.tools.export import export_run

    built = BuiltTrainers(monkeypatch)
    run_training(small(tmp_path / "gang", **RELAY, **GANG), console=QUIET)
    built.shut_down()
    export_run(tmp_path / "gang", tmp_path / "gang-export")
    export_run(local[0], tmp_path / "local-export")
    for agent in ("a1", "a2"):
        ours = AutoModelForCausalLM.from_pretrained(tmp_path / "gang-export" / agent)
        theirs = AutoModelForCausalLM.from_pretrained(tmp_path / "local-export" / agent)
        for (name, mine), (_, other) in zip(
            ours.state_dict().items(), theirs.state_dict().items(), strict=True
        ):
            torch.testing.assert_close(mine, other, rtol=1e-3, atol=1e-4, msg=name)
    manifest = json.loads((tmp_path / "gang-export" / "manifest.json").read_text())
    assert manifest["agents"]["a1"]["kind"] == "model"


class _KillRank(Callback):
    """Kills rank 1 of ``agent``'s gang after the first update of stage ``stage``."""

    def __init__(self, built: BuiltTrainers, agent: str, stage: int) -> None:
        self.built, self.agent, self.stage, self.killed = built, agent, stage, False

    def on_update(self, record: Any) -> None:
        if record.stage == self.stage and not self.killed:
            updater = self.built.trainers[-1].slots[self.agent].updater
            assert isinstance(updater, GangUpdater)
            import ray

            ray.kill(updater.ranks[1], no_restart=True)
            self.killed = True


def test_a_rank_killed_mid_run_costs_a_replay_of_its_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: tuple[Path, dict[str, Any]]
) -> None:
    built = BuiltTrainers(monkeypatch)
    killer = _KillRank(built, "a2", stage=1)
    out = io.StringIO()
    config = small(tmp_path / "gang", **RELAY, **GANG)
    summary = run_training(config, console=Console(file=out, width=200), callbacks=[killer])
    assert killer.killed
    text = " ".join(out.getvalue().split())
    assert "the agent actor of agent 'a2' died" in text
    assert "replaying stage 2 (restart 1 of at most 3)" in text
    _same_numbers(summary, local[1])
    built.shut_down()


def test_ray_rollout_workers_play_a_gangs_gathered_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: tuple[Path, dict[str, Any]]
) -> None:
    """With Ray rollout workers too, each accepted update's whole weights go from the gang's
    first rank to the workers through the object store, and the run ends where the run in one
    process does."""
    built = BuiltTrainers(monkeypatch)
    workers = {"runner__backend": "ray", "runner__workers": 1, "runner__num_cpus": 0.25}
    summary = run_training(small(tmp_path / "gang", **RELAY, **GANG, **workers), console=QUIET)
    _same_numbers(summary, local[1])
    built.shut_down()
    for trainer in built.trainers:
        trainer.runner.shutdown()


def test_a_gangs_frozen_reference_is_scored_as_one_process_scores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``optim.ref_kl_coef > 0``: each rank freezes its shards of the team as training starts
    (a second sharded copy), the reference's log-probs are gathered like the policy's, and the
    updates' reference KL equals the run in one process."""
    with_reference = {**RELAY, "optim__ref_kl_coef": 0.5}
    one = run_training(small(tmp_path / "local", **with_reference), console=QUIET)
    built = BuiltTrainers(monkeypatch)
    summary = run_training(small(tmp_path / "gang", **with_reference, **GANG), console=QUIET)
    _same_numbers(summary, one)
    assert all(u["ref_kl"] == u["ref_kl"] for u in summary["updates"])  # measured (not NaN)
    for ours, theirs in zip(summary["updates"], one["updates"], strict=True):
        assert ours["ref_kl"] == pytest.approx(theirs["ref_kl"], rel=1e-3, abs=1e-6)
    assert "reference" in _slots(tmp_path / "gang")["a1"]
    built.shut_down()
