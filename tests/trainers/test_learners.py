"""The learner registry and API: the built-ins give exactly the numbers they gave before they
moved out of ``TeamTrainer.run_stage``; ids, short names, "did you mean", plugins and a learner
passed as an object."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from golden_learners import AGENTS, CASES, comparable, differences, record
from helpers_trainers import config, env_fn, tabular_team

from teamtr_core.errors import ConfigError
from trainers.learners import Learner
from trainers.learners.independent import IndependentGRPO
from trainers.learners.joint import Joint
from trainers.learners.naive_sequential import NaiveSequential
from trainers.learners.registry import (
    DuplicateLearnerError,
    InvalidLearnerIdError,
    LearnerRegistry,
    UnknownLearnerError,
    learner_spec,
    make_learner,
    registry,
)
from trainers.learners.stage import Stage
from trainers.learners.team_trainer import TeamTrainer
from trainers.learners.teamtr import TeamTR
from trainers.run.config_file import load_train_config

GOLDEN = json.loads(Path(__file__).with_name("golden_learners.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_builtin_learners_reproduce_the_numbers_recorded_before_the_registry(case: str) -> None:
    now = comparable(record(CASES[case]))
    # Floats within a relative 1e-6 (CPUs sum in different orders); the schedule, counts,
    # names and flags exactly. Refresh with `make golden` (tests/trainers/golden_learners.py).
    assert differences(now, GOLDEN[case], case) == []


def test_golden_comparison_tolerates_float_rounding_and_nothing_else() -> None:
    golden = {"loss": 0.0446974750166633, "n": 3, "ok": True, "agent": "b", "kl": math.nan}
    assert differences({**golden, "loss": 0.044697475016663296}, golden) == []
    assert differences({**golden, "loss": 0.04469747501666 * (1 + 1e-5)}, golden) != []
    assert differences({**golden, "n": 4}, golden) == [".n: 4 != 3"]
    assert differences({**golden, "ok": 1}, golden) == [".ok: 1 != True"]
    assert differences({**golden, "kl": 0.0}, golden) == [".kl: 0.0 != nan"]
    assert differences({"xs": [1.0, 2.0]}, {"xs": [1.0]}) == [".xs: 2 items != 1"]
    assert differences({"a": 1e-17}, {"a": -1e-17}) == []  # a cancelled mean near zero


def test_builtins_are_registered_under_versioned_ids_and_short_names() -> None:
    assert {"teamtr/TeamTR-v0", "teamtr/NaiveSequential-v0", "teamtr/Joint-v0"} <= set(registry)
    assert type(make_learner("teamtr")) is TeamTR
    assert type(make_learner("teamtr/NaiveSequential-v0")) is NaiveSequential
    assert type(make_learner("joint")) is Joint
    assert learner_spec("naive_sequential").id == "teamtr/NaiveSequential-v0"


def test_unknown_ids_suggest_close_matches_and_bad_ids_are_refused() -> None:
    with pytest.raises(UnknownLearnerError, match="Did you mean 'teamtr/TeamTR-v0'"):
        learner_spec("teamtr/TeamTr-v0")
    with pytest.raises(UnknownLearnerError, match="Did you mean 'naive_sequential'"):
        learner_spec("naive_sequental")
    fresh = LearnerRegistry(plugins=False)
    with pytest.raises(InvalidLearnerIdError, match="no version"):
        fresh.register("mylab/Mine", TeamTR)
    with pytest.raises(InvalidLearnerIdError, match="Malformed learner id 'no good!'.*TeamTR-v0"):
        fresh.register("no good!", TeamTR)
    fresh.register("mylab/Mine-v0", TeamTR)
    with pytest.raises(DuplicateLearnerError):
        fresh.register("mylab/Mine-v0", Joint)


def test_config_reports_an_unknown_learner_with_the_other_problems() -> None:
    with pytest.raises(ConfigError) as err:
        load_train_config(None, ["schedule.learner=teamtr/TeamTr-v0", "optim.lr=fast"])
    text = str(err.value)
    assert "schedule.learner: No learner registered as 'teamtr/TeamTr-v0'" in text
    assert "Did you mean 'teamtr/TeamTR-v0'" in text and "optim.lr: expected number" in text
    # a setting of another learner: not one of TeamTR's, its own listed
    refused = r"learner_options \(teamtr\): unknown key 'importance_weighting'"
    with pytest.raises(ConfigError, match=refused + r".*allowed: resample_every"):
        load_train_config(
            None, ["schedule.learner=teamtr", "learner_options.importance_weighting=true"]
        )
    # its old place is refused with the new key named
    with pytest.raises(ConfigError, match="schedule.importance_weighting was renamed to "):
        load_train_config(None, ["schedule.importance_weighting=true"])
    # A configuration built in Python is checked by the trainer it is given to.
    unknown = config(schedule__learner="teamtr/TeamTr-v0")
    with pytest.raises(ConfigError, match="schedule.learner: No learner registered"):
        TeamTrainer(unknown, lambda: env_fn(AGENTS), tabular_team(AGENTS))
    rejected = config(schedule__learner="teamtr", learner_options__importance_weighting=True)
    with pytest.raises(ConfigError, match=refused):
        TeamTrainer(rejected, lambda: env_fn(AGENTS), tabular_team(AGENTS))
    # a learner that takes no settings says so
    with pytest.raises(ConfigError, match="joint takes no settings, got resample_every"):
        load_train_config(None, ["schedule.learner=joint", "learner_options.resample_every=2"])


class EveryAgentOnOneBatch(Learner):
    """A learner that is not built in: one stage-start batch of B prompts, every agent updated
    on all of it without a trust region (independent GRPO-style updates)."""

    stale_diagnostics = False

    def run_stage(self, stage: Stage) -> None:
        batch = stage.sample(0, stage.schedule.problems_per_batch)
        for i, agent in enumerate(stage.order):
            stage.update(agent, batch, index=i, trust_region=False)
        stage.log("custom/batches", 1)


def test_a_learner_object_or_a_registered_class_drives_the_shared_machinery() -> None:
    cfg = config(diagnostics=False, schedule__stages=1)
    trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS), EveryAgentOnOneBatch())
    report = trainer.run_stage()
    assert [u.agent for u in report.updates] == list(AGENTS)
    assert all(u.delta == math.inf and u.in_region for u in report.updates)
    assert report.metrics["custom/batches"] == 1.0 and trainer.stage == 1
    # one batch of B prompts (x G rollouts) at the stage start
    b, g = cfg.schedule.problems_per_batch, cfg.schedule.group_size
    assert [(e.index, e.purpose, e.episodes) for e in report.samples] == [(0, "train", b * g)]
    registry.register("tests/EveryAgent-v0", EveryAgentOnOneBatch)
    try:
        cfg = config(diagnostics=False, schedule__stages=1, schedule__learner="tests/EveryAgent-v0")
        assert type(TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS)).learner) is (
            EveryAgentOnOneBatch
        )
    finally:
        registry.unregister("tests/EveryAgent-v0")


def test_a_broken_plugin_is_skipped_with_a_warning_and_named_in_errors() -> None:
    from importlib import metadata

    broken = metadata.EntryPoint("broken", "no_such_module_xyz:register", "teamtr.learners")

    def hook(registry: LearnerRegistry) -> None:
        registry.register("good/Joint-v0", Joint)

    fake = metadata.EntryPoint("ok", f"{__name__}:_hook", "teamtr.learners")
    globals()["_hook"] = hook
    reg = LearnerRegistry(entry_points=lambda: [fake, broken])
    with pytest.warns(Warning, match="Learner plugin 'broken'"):
        assert "good/Joint-v0" in list(reg)
    with pytest.raises(UnknownLearnerError, match="plugin\\(s\\) \\['broken'\\] failed to load"):
        reg.spec("broken/Thing-v0")


def test_the_learner_checks_a_config_once_when_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = TeamTR.check

    def counting(self: TeamTR, cfg: Any) -> list[str]:
        calls.append(cfg.schedule.learner)
        return original(self, cfg)

    monkeypatch.setattr(TeamTR, "check", counting)
    cfg = config(diagnostics=False, schedule__stages=1)
    assert calls == []  # a TrainConfig built directly is not checked by its learner
    load_train_config(None, ["diagnostics=off", "schedule.stages=1"])
    assert calls == ["teamtr/TeamTR-v0"]  # a loaded one is, once
    TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS)).run_stage()
    assert len(calls) == 2  # the trainer checks it once: running a stage does not check again
    TeamTrainer(cfg, lambda: env_fn(AGENTS), tabular_team(AGENTS), TeamTR())
    assert len(calls) == 3  # a learner object given to the trainer checks it itself


def test_independent_grpo_is_joint_without_a_trust_region() -> None:
    """The built-in ``independent``: one stage-start batch (the joint budget), every agent a
    plain step on its slice, never held to a radius; with joint's region turned off the two give
    the same parameters from the same start."""
    assert type(make_learner("independent")) is IndependentGRPO
    assert learner_spec("independent").id == "teamtr/IndependentGRPO-v0"
    cfg = config(
        diagnostics=False,
        schedule__stages=2,
        schedule__learner="independent",
        trust_region__monitor_without_region=True,  # measures the steps' KL (kept anyway)
    )
    team = tabular_team(AGENTS)
    trainer = TeamTrainer(cfg, lambda: env_fn(AGENTS), team)
    report = trainer.run_stage()
    assert [u.agent for u in report.updates] == list(AGENTS)
    assert all(u.delta == math.inf and u.backtracks == 0 for u in report.updates)
    assert report.metrics["independent/kl_max"] == max(u.kl_raw for u in report.updates)
    reports = [report, trainer.run_stage()]
    joint_cfg = config(
        diagnostics=False,
        schedule__stages=2,
        schedule__learner="joint",
        trust_region__delta_mode="none",
    )
    joint_team = tabular_team(AGENTS)
    joint = TeamTrainer(joint_cfg, lambda: env_fn(AGENTS), joint_team)
    joint_reports = [joint.run_stage(), joint.run_stage()]

    def sampled(reports: list[Any]) -> list[tuple[int, int, str, int]]:
        return [(e.stage, e.index, e.purpose, e.episodes) for r in reports for e in r.samples]

    # joint's budget: one stage-start batch of n*B prompts per stage
    assert (
        sampled(reports) == sampled(joint_reports) == [(s, 0, "train", 3 * 4 * 4) for s in (0, 1)]
    )
    for agent in AGENTS:
        for p, q in zip(team[agent].parameters(), joint_team[agent].parameters()):
            assert torch.allclose(p, q, atol=1e-6), agent
