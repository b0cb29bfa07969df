"""update_agent: the trust region is enforced (backtracking, reverting), non-finite losses are
rejected with parameters restored, and micro-batching does not change an update."""

from __future__ import annotations

import math

import torch

from adapters.tabular import TabularPolicy, state_kl
from teamtr_core.policy import SamplingParams
from teamtr_env.rollout import MessageRecord
from trainers.config import OptimConfig, TrustRegionConfig
from trainers.optim.trust_region import adapt_beta, adapt_delta
from trainers.optim.update import UpdateResult, update_agent

MESSAGES = ["x", "y", "z"]
REGION_KEYS = {"max_backtracks", "monitor_without_region", "monitor_messages", "monitor_subsample"}


def settings(epochs: int = 2, monitor_without_region: bool = True, **changes: object) -> dict:
    """``update_agent``'s config sections (``optim=``, ``region=``) with ``changes``; these
    tests' baseline is 2 epochs and a KL measured even without a region."""
    region = {k: v for k, v in changes.items() if k in REGION_KEYS}
    optim = {k: v for k, v in changes.items() if k not in REGION_KEYS}
    return {
        "optim": OptimConfig(epochs=epochs, **optim),  # type: ignore[arg-type]
        "region": TrustRegionConfig(monitor_without_region=monitor_without_region, **region),  # type: ignore[arg-type]
    }


def batch(n: int = 32, seed: int = 0) -> tuple[TabularPolicy, list[MessageRecord], torch.Tensor]:
    policy = TabularPolicy(["s"], MESSAGES, featurize=lambda c: "s", init="uniform")
    gens = policy.generate(["s"] * n, SamplingParams(temperature=1.0, seed=seed))
    msgs = [MessageRecord(i, i, 0, "a", "s", g.text, g.token_ids) for i, g in enumerate(gens)]
    adv = torch.tensor([1.0 if g.text == "x" else -0.5 for g in gens])
    return policy, msgs, adv


def test_small_step_is_accepted_inside_the_region() -> None:
    policy, msgs, adv = batch()
    old = policy.copy()
    opt = torch.optim.SGD(policy.parameters(), lr=0.05)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=0.05, **settings(epochs=1))
    assert result.accepted and result.reason == "ok" and result.backtracks == 0
    assert 0 < result.kl_tok <= 0.05 and result.in_region
    assert policy.probs("s")[0] > old.probs("s")[0]  # moved toward the advantaged message
    # The monitor's estimate matches the exact KL of the tabular policies (Monte Carlo, 32 msgs).
    assert abs(result.kl_tok - float(state_kl(old, policy).detach()[0])) < 0.02


def test_too_large_step_is_backtracked_into_the_region() -> None:
    policy, msgs, adv = batch()
    old = policy.copy()
    opt = torch.optim.SGD(policy.parameters(), lr=50.0)
    result = update_agent(
        policy,
        opt,
        msgs,
        adv,
        beta=0.0,
        delta=0.01,
        **settings(epochs=3, max_backtracks=12),
    )
    assert result.kl_raw > 0.01  # the full step left the region
    assert result.accepted and result.reason == "backtracked" and result.backtracks >= 1
    assert result.kl_tok <= 0.01 and result.in_region
    assert 0 < result.step_scale < 1
    full_direction = policy.logits.detach() - old.logits.detach()
    assert full_direction.abs().sum() > 0
    # beta adapts on the kept KL: a backtracked update inside the region never doubles it.
    assert adapt_beta(0.1, result, delta=0.01) <= 0.1


def test_out_of_region_without_backtracks_reverts_exactly() -> None:
    policy, msgs, adv = batch()
    before = policy.logits.detach().clone()
    opt = torch.optim.Adam(policy.parameters(), lr=5.0)
    opt_state = str(opt.state_dict())
    result = update_agent(
        policy,
        opt,
        msgs,
        adv,
        beta=0.0,
        delta=1e-4,
        **settings(epochs=3, max_backtracks=0),
    )
    assert not result.accepted and result.reason == "out_of_region"
    assert result.kl_raw > 1e-4 and result.step_scale == 0.0
    assert torch.equal(policy.logits.detach(), before)
    assert str(opt.state_dict()) == opt_state  # optimizer state restored too


def test_nonfinite_loss_is_rejected_and_parameters_restored() -> None:
    policy, msgs, adv = batch()
    before = policy.logits.detach().clone()
    adv[3] = math.nan
    opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    result = update_agent(policy, opt, msgs, adv, beta=0.1, delta=0.01, **settings())
    assert not result.accepted and result.reason == "nonfinite_loss"
    assert torch.equal(policy.logits.detach(), before)


def test_no_trust_region_accepts_any_step() -> None:
    policy, msgs, adv = batch()
    opt = torch.optim.SGD(policy.parameters(), lr=50.0)
    result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=None, **settings(epochs=3))
    assert result.accepted and result.kl_tok > 0.01 and result.backtracks == 0


def test_micro_batch_split_does_not_change_the_update() -> None:
    results = []
    for micro in (1, 5, 64):
        policy, msgs, adv = batch(n=20)
        opt = torch.optim.Adam(policy.parameters(), lr=0.1)
        update_agent(
            policy,
            opt,
            msgs,
            adv,
            beta=0.2,
            delta=None,
            **settings(epochs=2, micro_batch_size=micro),
        )
        results.append(policy.logits.detach().clone())
    torch.testing.assert_close(results[0], results[1], atol=1e-10, rtol=0)
    torch.testing.assert_close(results[0], results[2], atol=1e-10, rtol=0)


def _result(**fields: object) -> UpdateResult:
    base = dict(
        accepted=True,
        reason="ok",
        kl_raw=0.007,
        kl_tok=0.007,
        in_region=True,
        backtracks=0,
        step_scale=1.0,
        l_seq=0.0,
        ratio_clip_frac=0.0,
        messages=1,
        tokens=1,
        update_s=0.0,
        monitor_s=0.0,
    )
    return UpdateResult(**{**base, **fields})  # type: ignore[arg-type]


def scored_batches(policy: TabularPolicy) -> list[int]:
    """Wraps ``policy.logprobs``; the returned list gets each call's number of messages."""
    sizes: list[int] = []
    original = policy.logprobs

    def counting(prompts, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(prompts))
        return original(prompts, *args, **kwargs)

    policy.logprobs = counting  # type: ignore[method-assign]
    return sizes


def test_behaviour_log_probs_come_from_the_first_epoch_exactly_and_save_a_pass() -> None:
    """Without precomputed behaviour log-probs the first epoch's forward pass provides them: the
    update equals the one given ``score(...)`` beforehand, with one scoring pass fewer."""
    from trainers.optim.scoring import score

    results, calls = [], []
    for precompute in (True, False):
        policy, msgs, adv = batch(seed=3)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        behaviour = score(policy, msgs, 8) if precompute else None
        counted = scored_batches(policy)
        sections = settings(epochs=3, micro_batch_size=8)
        result = update_agent(
            policy, opt, msgs, adv, beta=0.1, delta=1.0, **sections, behaviour=behaviour
        )
        results.append((result, policy.logits.detach().clone()))
        calls.append(len(counted))
    (a, logits_a), (b, logits_b) = results
    assert torch.equal(logits_a, logits_b)
    assert (a.kl_tok, a.l_seq, a.tokens, a.ratio_clip_frac) == (
        b.kl_tok,
        b.l_seq,
        b.tokens,
        b.ratio_clip_frac,
    )
    # 4 micro-batches: 3 epochs + 1 monitor pass each, and no separate behaviour pass.
    assert calls == [16, 16]
    assert b.tokens == 32


def test_without_a_trust_region_the_monitor_pass_is_skipped_unless_asked() -> None:
    runs = {}
    for monitor in (False, True):
        policy, msgs, adv = batch(seed=5)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        calls = scored_batches(policy)
        sections = settings(epochs=2, micro_batch_size=32, monitor_without_region=monitor)
        result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=None, **sections)
        runs[monitor] = (result, len(calls), policy.logits.detach().clone())
    skipped, monitored = runs[False], runs[True]
    assert torch.equal(skipped[2], monitored[2])  # the same update either way
    assert (skipped[1], monitored[1]) == (2, 3)  # one forward pass fewer
    assert math.isnan(skipped[0].kl_tok) and math.isnan(skipped[0].l_seq) and skipped[0].accepted
    assert monitored[0].kl_tok > 0 and skipped[0].monitor_s == 0.0


def test_the_kl_check_can_score_a_subset_of_the_messages() -> None:
    """monitor_messages=0.25 scores 8 of 32 messages after the step, and the update is the same
    (the estimator's unbiasedness is tested in test_kl.py)."""
    runs = {}
    for fraction in (1.0, 0.25):
        policy, msgs, adv = batch(seed=7)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        sizes = scored_batches(policy)
        sections = settings(epochs=1, micro_batch_size=32, monitor_messages=fraction)
        result = update_agent(policy, opt, msgs, adv, beta=0.0, delta=10.0, **sections)
        runs[fraction] = (result, sizes, policy.logits.detach().clone())
    full, part = runs[1.0], runs[0.25]
    assert full[1] == [32, 32] and part[1] == [32, 8]  # the epoch's pass, then the check
    assert torch.equal(full[2], part[2])
    assert part[0].kl_tok > 0 and math.isfinite(part[0].kl_tok) and part[0].tokens == 32


def test_adaptation_rules() -> None:
    assert adapt_beta(0.1, _result(kl_tok=0.001, kl_raw=0.001), delta=0.01) == 0.05
    assert adapt_beta(0.1, _result(kl_tok=0.007, kl_raw=0.007), delta=0.01) == 0.1
    reverted = _result(accepted=False, reason="out_of_region", kl_tok=0.0, kl_raw=0.5)
    assert adapt_beta(0.1, reverted, delta=0.01) == 0.2
    assert adapt_beta(0.1, _result(accepted=False, kl_tok=0.0, kl_raw=math.nan), delta=0.01) == 0.2
    # A full step that left the region but was backtracked into it keeps beta: backtracking
    # fixed the step (adapting on the raw first try doubled beta here).
    backtracked = _result(reason="backtracked", kl_raw=0.08, kl_tok=0.006, backtracks=3)
    assert adapt_beta(0.1, backtracked, delta=0.01) == 0.1
    assert adapt_beta(0.1, _result(kl_raw=0.08, kl_tok=0.002, backtracks=5), delta=0.01) == 0.05
    assert adapt_beta(0.004, _result(kl_tok=0.001), delta=0.01, low=0.1 / 32) == 0.1 / 32  # floor
    policy, msgs, adv = batch()
    opt = torch.optim.SGD(policy.parameters(), lr=1e-4)
    small = update_agent(policy, opt, msgs, adv, beta=0.0, delta=0.01, **settings(epochs=1))
    assert adapt_delta(0.01, small, low=0.001, high=0.05) == 0.015


def test_truncated_importance_correction_weights_messages_by_trainer_over_engine() -> None:
    import dataclasses

    from trainers.optim.engine import truncated_is_weights

    policy, msgs, adv = batch()
    uniform = math.log(1 / 3)  # the trainer's log-prob of every message
    matched = [dataclasses.replace(m, logprobs=(uniform,)) for m in msgs]
    # an engine that matches the trainer: every weight is 1, the update is the uncorrected one
    plain, corrected = policy.copy(), policy.copy()
    r_plain = update_agent(
        plain, torch.optim.SGD(plain.parameters(), lr=0.05), msgs, adv, beta=0.0, delta=None,
        **settings(),
    )  # fmt: skip
    r_tis = update_agent(
        corrected, torch.optim.SGD(corrected.parameters(), lr=0.05), matched, adv, beta=0.0,
        delta=None, tis_cap=2.0, **settings(),
    )  # fmt: skip
    assert r_tis.tis_mean == 1.0 and math.isnan(r_plain.tis_mean)
    assert torch.allclose(plain.logits, corrected.logits)
    assert r_tis.logprob_gap < 1e-6 and math.isnan(r_plain.logprob_gap)
    # an engine that over-sampled "x": x weighs pi_trainer/pi_engine = e^-0.5, the others
    # e^1 truncated at 2; a message without engine log-probs weighs 1
    skewed = [
        dataclasses.replace(m, logprobs=(uniform + (0.5 if m.text == "x" else -1.0),)) for m in msgs
    ]
    behaviour = policy.logprobs([m.context for m in msgs], [m.token_ids for m in msgs])
    weights = truncated_is_weights(skewed, behaviour, cap=2.0)
    expected = torch.tensor([math.exp(-0.5) if m.text == "x" else 2.0 for m in msgs])
    assert torch.allclose(weights, expected)
    assert truncated_is_weights(msgs, behaviour, cap=2.0).eq(1).all()
    moved = policy.copy()
    result = update_agent(
        moved, torch.optim.SGD(moved.parameters(), lr=0.05), skewed, adv, beta=0.0, delta=None,
        tis_cap=2.0, **settings(),
    )  # fmt: skip
    assert (
        result.tis_mean == float(expected.mean())
        or abs(result.tis_mean - float(expected.mean())) < 1e-6
    )
    # "x" carries the positive advantage and now weighs less: the step toward it is smaller
    assert moved.probs("s")[0] - policy.probs("s")[0] < plain.probs("s")[0] - policy.probs("s")[0]


def test_the_adaptive_beta_stops_at_its_floor() -> None:
    """A radius that no step reaches halves beta after every update; it stops at
    ``trust_region.beta_floor`` (beta / 32 by default, or ``beta_min``) instead of collapsing
    to 1e-4."""
    import pytest
    from helpers_trainers import config, env_fn, tabular_team

    from trainers.learners.team_trainer import TeamTrainer

    assert TrustRegionConfig(beta=0.1).beta_floor == 0.1 / 32
    assert TrustRegionConfig(beta=0.1, beta_min=0.02).beta_floor == 0.02
    with pytest.raises(ValueError, match="beta_min must be in"):
        TrustRegionConfig(beta=0.1, beta_min=0.5)
    for beta_min, floor in ((None, 0.1 / 32), (0.05, 0.05)):
        cfg = config(
            schedule__learner="teamtr",
            schedule__stages=8,
            diagnostics=False,
            trust_region__delta=50.0,
            trust_region__beta=0.1,
            trust_region__beta_min=beta_min,
        )
        trainer = TeamTrainer(cfg, env_fn, tabular_team())
        betas = [u.beta for _ in range(8) for u in trainer.run_stage().updates if u.agent == "a"]
        assert min(betas) == pytest.approx(floor) and betas[-1] == pytest.approx(floor), betas
