"""The stage machinery: who samples when, under which parameters; invariances between schedules;
diagnostics; the importance-weighting ablation."""

from __future__ import annotations

import math

import torch
from helpers_trainers import config, env_fn, tabular_team

from trainers.team_trainer import TeamTrainer


def run(cfg, agents=("a", "b"), seed=0, stages=None) -> TeamTrainer:
    trainer = TeamTrainer(cfg, lambda: env_fn(agents), tabular_team(agents, seed))
    for _ in range(stages or cfg.schedule.stages):
        trainer.run_stage()
    return trainer


def test_teamtr_resamples_under_the_intermediate_team_before_every_update() -> None:
    trainer = run(config(schedule__method="teamtr", schedule__stages=2), agents=("a", "b", "c"))
    train = [e for e in trainer.samples if e.purpose == "train"]
    assert [(e.stage, e.index) for e in train] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    # Rollout i of a stage was produced after i accepted updates of that stage.
    first = train[0].versions
    assert train[1].versions == {**first, "a": first["a"] + 1}
    assert train[2].versions == {**first, "a": first["a"] + 1, "b": first["b"] + 1}
    assert not [e for e in trainer.samples if e.purpose == "diagnostic"]  # fresh batches suffice


def test_naive_sequential_reuses_stage_start_rollouts() -> None:
    trainer = run(
        config(schedule__method="naive_sequential", schedule__stages=2, diagnostics=False),
        agents=("a", "b", "c"),
    )
    train = [e for e in trainer.samples if e.purpose == "train"]
    assert [(e.stage, e.index) for e in train] == [(0, 0), (1, 0)]
    # Matched budget: one batch with as many rollouts as teamtr's three batches.
    assert train[0].episodes == 3 * 4 * 4
    assert train[1].versions == {"a": 1, "b": 1, "c": 1}


def test_per_sample_budget_and_resample_every() -> None:
    naive = run(
        config(
            schedule__method="naive_sequential",
            schedule__budget="per_sample",
            schedule__stages=1,
            diagnostics=False,
        ),
        agents=("a", "b", "c"),
    )
    assert [e.episodes for e in naive.samples] == [16]
    every2 = run(
        config(schedule__method="teamtr", schedule__resample_every=2, schedule__stages=1),
        agents=("a", "b", "c"),
    )
    assert [e.index for e in every2.samples if e.purpose == "train"] == [0, 2]


def test_one_agent_teamtr_equals_naive_sequential() -> None:
    a = run(config(schedule__method="teamtr"), agents=("solo",))
    b = run(config(schedule__method="naive_sequential"), agents=("solo",))
    assert torch.equal(a.slots["solo"].policy.logits, b.slots["solo"].policy.logits)
    assert a.slots["solo"].beta == b.slots["solo"].beta


def test_joint_equals_naive_sequential_with_separate_parameters() -> None:
    a = run(config(schedule__method="joint", diagnostics=False))
    b = run(config(schedule__method="naive_sequential", diagnostics=False))
    for agent in ("a", "b"):
        assert torch.equal(a.slots[agent].policy.logits, b.slots[agent].policy.logits)


def test_teamtr_differs_from_naive_with_two_agents() -> None:
    a = run(config(schedule__method="teamtr"))
    b = run(config(schedule__method="naive_sequential"))
    assert not torch.equal(a.slots["b"].policy.logits, b.slots["b"].policy.logits)


def test_stage_report_metrics_and_trust_region() -> None:
    trainer = TeamTrainer(config(), env_fn, tabular_team())
    report = trainer.run_stage()
    m = report.metrics
    for key in (
        "stage/reward_mean",
        "stage/kl_tok_mean",
        "stage/out_of_region_rate",
        "stage/rollouts",
        "stage/tokens",
        "stage/rollout_s",
        "stage/update_s",
        "stage/monitor_s",
        "agent/a/kl_tok",
        "agent/b/beta",
    ):
        assert key in m, key
    assert m["stage/rollouts"] == 2 * 4 * 4
    assert len(report.updates) == 2 and [u["agent"] for u in report.updates] == ["a", "b"]
    for u in report.updates:
        if u["accepted"]:
            assert u["kl_tok"] <= u["delta"] + 1e-12
    assert math.isnan(report.updates[0]["stale_gap"])  # no gap for the first update
    assert report.updates[1]["stale_gap"] >= 0


def test_naive_diagnostics_sample_intermediate_batches_outside_the_budget() -> None:
    trainer = TeamTrainer(config(schedule__method="naive_sequential"), env_fn, tabular_team())
    report = trainer.run_stage()
    diag = [e for e in trainer.samples if e.purpose == "diagnostic"]
    assert [(e.index, e.versions) for e in diag] == [(1, {"a": 1, "b": 0})]
    assert trainer.totals["diagnostic_rollouts"] == 16 and report.metrics["stage/rollouts"] == 32
    assert report.updates[1]["stale_gap"] >= 0


def test_update_orders() -> None:
    fixed = TeamTrainer(config(), lambda: env_fn(("a", "b", "c")), tabular_team(("a", "b", "c")))
    assert fixed.update_order(0) == ["a", "b", "c"]
    rev = TeamTrainer(
        config(schedule__order="reverse"),
        lambda: env_fn(("a", "b", "c")),
        tabular_team(("a", "b", "c")),
    )
    assert rev.update_order(0) == ["c", "b", "a"]
    rnd = TeamTrainer(
        config(schedule__order="random"),
        lambda: env_fn(("a", "b", "c")),
        tabular_team(("a", "b", "c")),
    )
    orders = {tuple(rnd.update_order(s)) for s in range(12)}
    assert len(orders) > 1 and all(sorted(o) == ["a", "b", "c"] for o in orders)
    assert rnd.update_order(3) == rnd.update_order(3)


def test_importance_weighting_ablation_runs_and_changes_the_update() -> None:
    plain = run(config(schedule__method="naive_sequential", diagnostics=False), stages=1)
    weighted = run(
        config(
            schedule__method="naive_sequential",
            schedule__importance_weighting=True,
            diagnostics=False,
        ),
        stages=1,
    )
    assert torch.equal(
        plain.slots["a"].policy.logits, weighted.slots["a"].policy.logits
    )  # first: w = 1
    assert not torch.equal(plain.slots["b"].policy.logits, weighted.slots["b"].policy.logits)


def test_fixed_teammates_are_not_trained() -> None:
    from adapters.scripted import ConstantPolicy

    policies = {"a": tabular_team()["a"], "b": ConstantPolicy("Answer: 1")}
    trainer = TeamTrainer(config(), env_fn, policies)
    report = trainer.run_stage()
    assert list(trainer.slots) == ["a"] and [u["agent"] for u in report.updates] == ["a"]


def test_learning_signal_on_an_exact_problem() -> None:
    trainer = run(config(schedule__stages=6, trust_region__delta=0.2, optim__lr=0.3))
    final = trainer.slots["b"].policy.probs("any")[0].item()  # "Answer: 1" is correct
    start = tabular_team()["b"].probs("any")[0].item()
    assert final > start + 0.1
