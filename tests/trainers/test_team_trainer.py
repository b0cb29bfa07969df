"""The stage machinery: who samples when, under which parameters; invariances between schedules;
diagnostics; the importance-weighting ablation."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
from helpers_trainers import MESSAGES, config, env_fn, tabular_team

from adapters.tabular import TabularPolicy
from trainers.learners.stage import SampleEvent, StageReport, batch_advantages
from trainers.learners.team_trainer import TeamTrainer


def run_reports(
    cfg, agents=("a", "b"), seed=0, stages=None
) -> tuple[TeamTrainer, list[StageReport]]:
    """The trainer after ``stages`` stages (all of the config's by default) and their reports."""
    trainer = TeamTrainer(cfg, lambda: env_fn(agents), tabular_team(agents, seed))
    reports = [trainer.run_stage() for _ in range(stages or cfg.schedule.stages)]
    return trainer, reports


def run(cfg, agents=("a", "b"), seed=0, stages=None) -> TeamTrainer:
    return run_reports(cfg, agents, seed, stages)[0]


def sampled(reports: list[StageReport], purpose: str | None = None) -> list[SampleEvent]:
    """What the stages of ``reports`` sampled, in order (only ``purpose``'s, if given)."""
    return [e for r in reports for e in r.samples if purpose is None or e.purpose == purpose]


def test_teamtr_resamples_under_the_intermediate_team_before_every_update() -> None:
    _, reports = run_reports(
        config(schedule__learner="teamtr", schedule__stages=2), agents=("a", "b", "c")
    )
    train = sampled(reports, "train")
    assert [(e.stage, e.index) for e in train] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    # Rollout i of a stage was produced after i accepted updates of that stage.
    first = train[0].versions
    assert train[1].versions == {**first, "a": first["a"] + 1}
    assert train[2].versions == {**first, "a": first["a"] + 1, "b": first["b"] + 1}


def test_stale_gap_is_measured_on_independent_batches_with_a_noise_floor() -> None:
    trainer = TeamTrainer(config(), lambda: env_fn(("a", "b", "c")), tabular_team(("a", "b", "c")))
    report = trainer.run_stage()
    train = {e.index: e for e in sampled([report], "train")}
    diag = sampled([report], "diagnostic")
    # Two stage-start batches (L_stale and the noise floor), then for every update after the
    # first a fresh batch of the intermediate team that is NOT the update batch (TeamTR's update
    # batch is in-sample for its own surrogate, so it cannot serve as L_inter). The first
    # stage-start batch also measures J(before); J(after) is one more batch at the stage's end.
    assert [e.index for e in diag] == [1000, 1001, 1, 2, 2001]
    assert diag[0].versions == diag[1].versions == train[0].versions
    assert diag[2].versions == train[1].versions and diag[3].versions == train[2].versions
    assert all(e.episodes == train[0].episodes for e in diag)  # equal sizes
    first, *rest = report.updates
    assert math.isnan(first.stale_gap) and math.isnan(first.noise_floor)
    for u in rest:
        assert u.stale_gap == abs(u.l_stale - u.l_inter)
        assert u.noise_floor >= 0 and math.isfinite(u.noise_floor)
    m = report.metrics
    assert m["stage/delta_stale"] == sum(u.stale_gap for u in rest)
    assert m["stage/delta_stale_noise_floor"] == sum(u.noise_floor for u in rest)
    assert trainer.totals["diagnostic_rollouts"] == 5 * 16 and m["stage/rollouts"] == 3 * 16


def test_naive_sequential_reuses_stage_start_rollouts() -> None:
    _, reports = run_reports(
        config(schedule__learner="naive_sequential", schedule__stages=2, diagnostics=False),
        agents=("a", "b", "c"),
    )
    train = sampled(reports, "train")
    assert [(e.stage, e.index) for e in train] == [(0, 0), (1, 0)]
    # One batch with as many rollouts as teamtr's three batches.
    assert train[0].episodes == 3 * 4 * 4
    assert train[1].versions == {"a": 1, "b": 1, "c": 1}


def test_disjoint_budget_gives_every_update_its_own_slice() -> None:
    agents = ("a", "b", "c")
    per_update = 4 * 4  # B prompts x G rollouts, one message per agent each
    for method in ("naive_sequential", "teamtr", "joint"):
        trainer = TeamTrainer(
            config(schedule__learner=method, diagnostics=False),
            lambda: env_fn(agents),
            tabular_team(agents),
        )
        report = trainer.run_stage()
        assert [u.messages for u in report.updates] == [per_update] * 3, method
        assert report.metrics["stage/rollouts"] == 3 * per_update, method
    # The slices are disjoint: agent i is updated on groups [i*B, (i+1)*B) of the stage batch.
    trainer = TeamTrainer(
        config(schedule__learner="naive_sequential", diagnostics=False),
        lambda: env_fn(agents),
        tabular_team(agents),
    )
    report = trainer.run_stage()
    # one stage-start batch of 3 x B prompts (x G rollouts), a slice of B groups per update
    assert [(e.index, e.episodes) for e in report.samples] == [(0, 3 * per_update)]
    assert [u.groups for u in report.updates] == [4] * 3
    matched = TeamTrainer(
        config(schedule__learner="naive_sequential", schedule__budget="matched", diagnostics=False),
        lambda: env_fn(agents),
        tabular_team(agents),
    )
    report = matched.run_stage()
    assert [u.messages for u in report.updates] == [3 * per_update] * 3  # 3x the gradient work


def test_disjoint_naive_updates_on_the_slices_of_the_stage_start_batch() -> None:
    """Each disjoint update equals a 'matched' update on that slice alone: run the slices by hand."""
    from trainers.optim.scoring import score
    from trainers.optim.update import update_agent

    agents = ("a", "b")
    cfg = config(schedule__learner="naive_sequential", diagnostics=False, schedule__stages=1)
    trainer = run(cfg, agents=agents)
    by_hand = TeamTrainer(cfg, lambda: env_fn(agents), tabular_team(agents))
    batch, _ = by_hand.sample(0, 0, 2 * 4)
    for j, agent in enumerate(agents):
        part = batch.groups(4 * j, 4 * (j + 1))
        slot = by_hand.slots[agent]
        msgs = part.messages_of(agent)
        adv = batch_advantages(part, cfg).advantages.flatten()
        update_agent(
            slot.policy,
            slot.optimizer,
            msgs,
            torch.tensor([float(adv[m.episode]) for m in msgs]),
            beta=slot.region.beta,
            delta=slot.region.delta,
            optim=cfg.optim,
            region=cfg.trust_region,
            temperature=by_hand.temperatures[agent],
            # as the stage sets it (diagnostics off here: none)
            flip_trials=cfg.diagnostics.flip_trials if cfg.diagnostics.cheap else 0,
            behaviour=score(slot.policy, msgs, 64),
        )
    for agent in agents:
        assert torch.equal(
            trainer.slots[agent].policy.logits, by_hand.slots[agent].policy.logits
        ), agent


def test_per_sample_budget_and_resample_every() -> None:
    _, naive = run_reports(
        config(
            schedule__learner="naive_sequential",
            schedule__budget="per_sample",
            schedule__stages=1,
            diagnostics=False,
        ),
        agents=("a", "b", "c"),
    )
    assert [e.episodes for e in sampled(naive)] == [16]
    _, every2 = run_reports(
        config(schedule__learner="teamtr", learner_options__resample_every=2, schedule__stages=1),
        agents=("a", "b", "c"),
    )
    assert [e.index for e in sampled(every2, "train")] == [0, 2]


def test_one_agent_teamtr_equals_naive_sequential() -> None:
    a = run(config(schedule__learner="teamtr"), agents=("solo",))
    b = run(config(schedule__learner="naive_sequential"), agents=("solo",))
    assert torch.equal(a.slots["solo"].policy.logits, b.slots["solo"].policy.logits)
    assert a.slots["solo"].region.beta == b.slots["solo"].region.beta


def test_joint_equals_naive_sequential_with_separate_parameters() -> None:
    a = run(config(schedule__learner="joint", diagnostics=False))
    b = run(config(schedule__learner="naive_sequential", diagnostics=False))
    for agent in ("a", "b"):
        assert torch.equal(a.slots[agent].policy.logits, b.slots[agent].policy.logits)


def test_teamtr_differs_from_naive_with_two_agents() -> None:
    a = run(config(schedule__learner="teamtr"))
    b = run(config(schedule__learner="naive_sequential"))
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
    assert len(report.updates) == 2 and [u.agent for u in report.updates] == ["a", "b"]
    for u in report.updates:
        if u.accepted:
            assert u.kl_tok <= u.delta + 1e-12
    assert math.isnan(report.updates[0].stale_gap)  # no gap for the first update
    assert report.updates[1].stale_gap >= 0
    assert "stage/delta_stale_noise_floor" in m and "agent/b/noise_floor" in m


class ClippingTabular(TabularPolicy):
    """A tabular policy whose "Answer: 2" messages are marked clipped (as a model's that ran out
    of tokens would be)."""

    def generate(self, prompts, sampling):  # type: ignore[no-untyped-def]
        gens = super().generate(prompts, sampling)
        return [dataclasses.replace(g, clipped=g.text == "Answer: 2") for g in gens]


def test_stage_metrics_carry_each_agents_share_of_clipped_messages() -> None:
    """``agent/<name>/clipped_ratio`` and ``stage/clipped_ratio``: over the stage's training
    rollouts only (not the diagnostic batches that ``full`` diagnostics sample)."""
    team = tabular_team()
    clipping = ClippingTabular(["any"], MESSAGES, featurize=lambda c: "any", init="random", seed=0)
    trainer = TeamTrainer(config(), env_fn, {"a": clipping, "b": team["b"]})
    batches = []

    class Recording:  # the trainer's sampler, recording the training batches it draws
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def __call__(self, stage, index, prompts, purpose="train", *, strategy=None):  # type: ignore[no-untyped-def]
            batch, event = self.inner(stage, index, prompts, purpose, strategy=strategy)
            if purpose == "train":
                batches.append(batch)
            return batch, event

    trainer.sampler = Recording(trainer.sampler)  # type: ignore[assignment]
    report = trainer.run_stage()
    m = report.metrics
    assert any(e.purpose == "diagnostic" for e in report.samples)
    a = [msg for b in batches for msg in b.messages_of("a")]
    expected = sum(msg.text == "Answer: 2" for msg in a) / len(a)
    assert 0 < expected < 1
    assert m["agent/a/clipped_ratio"] == expected and m["agent/b/clipped_ratio"] == 0.0
    written = sum(len(b.messages) for b in batches)
    assert m["stage/clipped_ratio"] == sum(msg.text == "Answer: 2" for msg in a) / written


def test_naive_diagnostics_sample_intermediate_batches_outside_the_budget() -> None:
    trainer = TeamTrainer(config(schedule__learner="naive_sequential"), env_fn, tabular_team())
    report = trainer.run_stage()
    diag = sampled([report], "diagnostic")
    start = {"a": 0, "b": 0}
    assert [(e.index, e.versions) for e in diag] == [
        (1000, start),
        (1001, start),
        (1, {"a": 1, "b": 0}),
        (2001, {"a": 1, "b": 1}),  # J after the stage
    ]
    assert trainer.totals["diagnostic_rollouts"] == 64 and report.metrics["stage/rollouts"] == 32
    assert report.updates[1].stale_gap >= 0


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
    plain = run(config(schedule__learner="naive_sequential", diagnostics=False), stages=1)
    weighted = run(
        config(
            schedule__learner="naive_sequential",
            learner_options__importance_weighting=True,
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
    assert list(trainer.slots) == ["a"] and [u.agent for u in report.updates] == ["a"]


def test_learning_signal_on_an_exact_problem() -> None:
    trainer = run(config(schedule__stages=6, trust_region__delta=0.2, optim__lr=0.3))
    final = trainer.slots["b"].policy.probs("any")[0].item()  # "Answer: 1" is correct
    start = tabular_team()["b"].probs("any")[0].item()
    assert final > start + 0.1


def test_per_agent_sampling_samples_and_scores_each_agent_at_its_own_temperature() -> None:
    from teamtr_core.policy import SamplingParams

    sampling = {"a": SamplingParams(temperature=0.0), "b": SamplingParams(temperature=1.0)}
    trainer = TeamTrainer(
        config(diagnostics=False), lambda: env_fn(("a", "b")), tabular_team(), sampling=sampling
    )
    batch, _ = trainer.sample(0, 0, 8)
    greedy = {m.text for m in batch.messages_of("a")}
    assert len(greedy) == 1  # temperature 0: the argmax message every time
    assert len({m.text for m in batch.messages_of("b")}) > 1
    assert trainer.temperatures == {"a": 1.0, "b": 1.0}  # greedy: scored at 1
    trainer.run_stage()  # both agents update with their own settings


def test_reward_start_is_the_stage_start_teams_batch(monkeypatch) -> None:
    """``stage/reward_start`` is the reward of the stage's first batch (comparable across
    learners); ``stage/reward_mean`` averages all of a stage's training batches."""
    from trainers.learners.stage import Stage

    seen: list[float] = []
    real = Stage.sample

    def recording(self, index, prompts):
        batch = real(self, index, prompts)
        seen.append(float(batch.rewards().mean()))
        return batch

    monkeypatch.setattr(Stage, "sample", recording)
    trainer = TeamTrainer(
        config(schedule__learner="teamtr", diagnostics=False),
        lambda: env_fn(("a", "b", "c")),
        tabular_team(("a", "b", "c")),
    )
    stage = trainer.run_stage()
    assert len(seen) == 3
    assert stage.metrics["stage/reward_start"] == seen[0]
    assert stage.metrics["stage/reward_mean"] == pytest.approx(sum(seen) / 3)


def test_learning_rate_warm_up_and_decay_over_the_stages() -> None:
    from trainers.config import OptimConfig

    warm = OptimConfig(lr=0.1, warmup_stages=2, lr_schedule="linear")
    assert [round(warm.lr_at(s, 6), 6) for s in range(6)] == [
        0.033333,
        0.066667,
        0.1,
        0.075,
        0.05,
        0.025,
    ]
    cosine = OptimConfig(lr=0.1, lr_schedule="cosine")
    assert cosine.lr_at(0, 4) == pytest.approx(0.1) and cosine.lr_at(2, 4) == pytest.approx(0.05)
    assert OptimConfig(lr=0.1).lr_at(5, 6) == 0.1  # constant by default
    with pytest.raises(ValueError, match="lr_schedule.*warmup_stages"):
        OptimConfig(lr_schedule="step", warmup_stages=-1)  # type: ignore[arg-type]
    trainer = TeamTrainer(
        config(optim__lr=0.05, optim__warmup_stages=1, schedule__stages=3, diagnostics=False),
        env_fn,
        tabular_team(),
    )
    lrs = [trainer.run_stage().metrics["stage/lr"] for _ in range(3)]
    assert lrs == [0.025, 0.05, 0.05]
    assert trainer.slots["a"].optimizer.param_groups[0]["lr"] == 0.05


def test_reference_kl_holds_the_team_near_where_training_started() -> None:
    """ref_kl_coef freezes each agent at the first stage; a large coefficient keeps the trained
    policy closer to it, and the reference survives a checkpoint round trip."""
    from adapters.tabular import state_kl

    drift = {}
    for coef in (0.0, 50.0):
        team = tabular_team()
        start = {a: p.copy() for a, p in team.items()}
        trainer = TeamTrainer(
            config(optim__ref_kl_coef=coef, optim__lr=0.5, schedule__stages=3, diagnostics=False),
            env_fn,
            team,
        )
        reports = [trainer.run_stage() for _ in range(3)]
        drift[coef] = sum(float(state_kl(start[a], team[a]).detach().sum()) for a in team)
        ref_kls = [u.ref_kl for r in reports for u in r.updates]
        if coef:
            reference = trainer.slots["a"].reference
            assert reference is not None and torch.equal(reference.logits, start["a"].logits)
            assert all(math.isfinite(k) and k >= 0 for k in ref_kls)
            assert "stage/reference_s" in reports[0].metrics
            state = trainer.state_dict()
            fresh = TeamTrainer(trainer.config, env_fn, tabular_team(seed=9))
            fresh.load_state_dict(state)
            assert torch.equal(fresh.slots["a"].reference.logits, start["a"].logits)  # type: ignore[union-attr]
        else:
            assert trainer.slots["a"].reference is None and all(math.isnan(k) for k in ref_kls)
    assert drift[50.0] < 0.5 * drift[0.0]


def test_the_budget_sizes_every_batch_in_one_place() -> None:
    from trainers.config import ScheduleConfig

    def schedule(budget: str) -> ScheduleConfig:
        return ScheduleConfig(budget=budget, problems_per_batch=4)  # type: ignore[arg-type]

    disjoint, matched, per_sample = (schedule(b) for b in ("disjoint", "matched", "per_sample"))
    assert [s.batch_prompts(3) for s in (disjoint, matched, per_sample)] == [12, 12, 4]
    assert disjoint.sliced(2) and not disjoint.sliced(1) and not matched.sliced(3)

    def prompts(learner: str, budget: str) -> list[tuple[int, int]]:
        """(index, prompts) of each training batch one stage of ``learner`` sampled."""
        cfg = config(
            schedule__learner=learner,
            schedule__budget=budget,
            schedule__stages=1,
            **({"learner_options__resample_every": 2} if learner == "teamtr" else {}),
            diagnostics=False,
        )
        _, reports = run_reports(cfg, agents=("a", "b", "c"))
        g = cfg.schedule.group_size
        return [(e.index, e.episodes // g) for e in sampled(reports, "train")]

    # One stage-start batch as large as TeamTR's batches of the stage together (B per update).
    assert prompts("naive_sequential", "matched") == [(0, 12)]
    # TeamTR resampling every 2 updates samples before updates 0 and 2 (covering 2 and 1
    # updates): B per update it serves, sliced under disjoint, whole under matched.
    assert prompts("teamtr", "matched") == prompts("teamtr", "disjoint") == [(0, 8), (2, 4)]


@pytest.mark.parametrize("estimator", ["group", "leave_one_out", "none"])
def test_the_advantage_baseline_of_the_config_reaches_every_update(estimator: str) -> None:
    """``optim.advantage`` is read by the trainer's advantages, which every learner's updates
    use: leave-one-out is the group mean's advantage times G/(G-1), none the raw reward."""
    cfg = config(optim__advantage=estimator, optim__normalize_advantages=False, optim__a_clip=None)
    trainer = run(cfg, stages=1)
    batch, _ = trainer.sample(1, 0, 4, "diagnostic")
    rewards = torch.tensor(batch.group_rewards(), dtype=torch.float32)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    expected = {"group": centred, "leave_one_out": centred * 4 / 3, "none": rewards}[estimator]
    assert torch.allclose(batch_advantages(batch, cfg).advantages, expected)
    with pytest.raises(Exception, match="advantage"):
        config(optim__advantage="mean")
