"""The paper's diagnostics in every run (``diagnostics: off | cheap | full``): what each level
computes, what it costs, and each estimator against the exact relay game
(trainers/exact/games.py)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers_relay import GAME, full_relay_run, run_relay
from helpers_trainers import config, env_fn, tabular_team
from rich.console import Console

from teamtr_core.errors import ConfigError
from trainers.config import DiagnosticsConfig, TrainConfig
from trainers.diagnostics.certificate import certificate_lower_bound
from trainers.diagnostics.estimators import episode_log_weights, hashed_state
from trainers.exact.games import (
    RelayGame,
    context_occupancy_tv,
    expected_return,
    importance_second_moment,
    occupancy_tv,
    surrogate,
    tables,
    token_kl,
)
from trainers.learners.team_trainer import TeamTrainer
from trainers.optim.records import UPDATE_KEYS
from trainers.run.config_file import load_train_config

AGENTS = ("a", "b", "c")


# -- the option ---------------------------------------------------------------------------------
def test_the_option_takes_a_level_a_section_or_the_old_booleans() -> None:
    assert TrainConfig().diagnostics.level == "cheap"  # every run measures what is free
    assert load_train_config(None, ["diagnostics=full"]).diagnostics.level == "full"
    assert load_train_config(None, ["diagnostics=off"]).diagnostics.level == "off"  # YAML: false
    assert load_train_config(None, ["diagnostics=true"]).diagnostics.level == "full"
    assert load_train_config(None, ["diagnostics.level=off"]).diagnostics.level == "off"
    assert TrainConfig(diagnostics="full").diagnostics == DiagnosticsConfig(level="full")
    cfg = load_train_config(None, ["diagnostics={level: full, buckets: 64, hoeffding: true}"])
    assert (cfg.diagnostics.buckets, cfg.diagnostics.hoeffding) == (64, True)
    with pytest.raises(ConfigError) as err:
        load_train_config(None, ["diagnostics={level: most, buckets: 1, a_max: 0}"])
    text = str(err.value)
    assert "most" in text and "buckets" in text and "a_max" in text  # every problem at once


def test_task_occupancy_needs_a_task_with_exact_states() -> None:
    with pytest.raises(ConfigError, match="state_key"):
        TeamTrainer(
            config(diagnostics={"level": "cheap", "occupancy": "task"}), env_fn, tabular_team()
        )


# -- what each level computes and costs ------------------------------------------------------
def test_off_computes_nothing_and_cheap_samples_nothing_beyond_training() -> None:
    off = TeamTrainer(config(diagnostics="off"), lambda: env_fn(AGENTS), tabular_team(AGENTS))
    report = off.run_stage()
    assert off.diagnostics is None
    # no KL-monitor flip trials: the updates computed no diagnostics of their own
    assert all(not u.result.diagnostics for u in report.updates)
    assert not [k for k in report.metrics if k.startswith(("diag/", "stage/diag"))]
    assert all(math.isnan(u.value(k)) for u in report.updates for k in UPDATE_KEYS)
    assert "stage/diagnostic_s" not in report.metrics

    cheap = TeamTrainer(config(diagnostics="cheap"), lambda: env_fn(AGENTS), tabular_team(AGENTS))
    report = cheap.run_stage()
    assert report.samples and all(e.purpose == "train" for e in report.samples)
    m = report.metrics
    for key in (
        "diag/d_occ",
        "diag/zeta_proxy",
        "diag/flip_rate_25",
        "diag/flip_rate_50",
        "diag/certificate_lb",
    ):
        assert math.isfinite(m[key]), key
    assert "diag/improvement" not in m and "diag/d_occ_noise_floor" not in m
    # each diagnostic's cost is in the time split, and they add up to stage/diagnostic_s
    parts = [v for k, v in m.items() if k.startswith("stage/diag_") and k.endswith("_s")]
    assert {"stage/diag_zeta_s", "stage/diag_flip_rate_s", "stage/diag_occupancy_s"} <= set(m)
    assert m["stage/diagnostic_s"] == pytest.approx(sum(parts))


def test_full_logs_every_quantity() -> None:
    trainer = TeamTrainer(
        config(diagnostics="full", schedule__stages=2),
        lambda: env_fn(AGENTS),
        tabular_team(AGENTS),
    )
    trainer.run_stage()
    m = trainer.run_stage().metrics
    for key in (
        "diag/d_occ",
        "diag/d_occ_noise_floor",
        "diag/zeta_clip",
        "diag/zeta_ratio",
        "diag/zeta_norm",
        "diag/zeta_proxy",
        "diag/flip_rate_25",
        "diag/flip_rate_50",
        "diag/certificate_lb",
        "diag/j_before",
        "diag/j_after",
        "diag/improvement",
        "diag/violation_rate",
        "diag/rank_corr",
        "stage/delta_stale",
        "stage/delta_stale_noise_floor",
        "stage/diag_stale_s",
        "stage/diag_improvement_s",
    ):
        assert key in m, key
    assert m["diag/improvement"] == m["diag/j_after"] - m["diag/j_before"]
    # the bound and improvement history survive a checkpoint
    state = trainer.state_dict()
    fresh = TeamTrainer(config(diagnostics="full"), lambda: env_fn(AGENTS), tabular_team(AGENTS))
    fresh.load_state_dict(state)
    assert fresh.diagnostics.improvements == trainer.diagnostics.improvements
    assert len(fresh.diagnostics.lower_bounds) == 2


def test_the_empirical_certificate_subtracts_the_finite_sample_correction() -> None:
    def lb(hoeffding: bool) -> dict:
        trainer = TeamTrainer(
            config(diagnostics={"level": "cheap", "hoeffding": hoeffding}),
            lambda: env_fn(AGENTS),
            tabular_team(AGENTS),
        )
        return trainer.run_stage().metrics

    plain, empirical = lb(False), lb(True)
    assert plain["diag/certificate_hoeffding_term"] == 0
    assert empirical["diag/certificate_hoeffding_term"] > 0
    assert empirical["diag/certificate_lb"] == pytest.approx(
        plain["diag/certificate_lb"] - empirical["diag/certificate_hoeffding_term"]
    )


def test_importance_weight_summary_is_logged_for_the_reweighting_ablation() -> None:
    trainer = TeamTrainer(
        config(
            schedule__learner="naive_sequential",
            learner_options__importance_weighting=True,
            diagnostics="cheap",
        ),
        lambda: env_fn(AGENTS),
        tabular_team(AGENTS),
    )
    report = trainer.run_stage()
    first, *later = report.updates
    assert first.iw_ess_over_b == 1.0 and first.iw_max == 1.0  # nothing updated before it
    assert all(0 < u.iw_ess_over_b <= 1 for u in later)
    assert {"diag/iw_ess_over_b", "diag/iw_p99", "diag/iw_max", "diag/iw_frac_gt_10"} <= set(
        report.metrics
    )
    # naive sequential trains on stage-start rollouts: no sample of its intermediate teams
    assert "diag/d_occ" not in report.metrics


def test_helpers() -> None:
    assert hashed_state("abc", 256) == hashed_state("abc", 256) < 256
    assert len({hashed_state(str(i), 1000) for i in range(100)}) > 90
    w = episode_log_weights([0, 0, 1], torch.tensor([2.0, 2.0, 0.5]))
    assert np.allclose(w.exp().numpy(), [2.0, 0.5])
    with pytest.raises(ValueError, match="different weights"):
        episode_log_weights([0, 0], torch.tensor([1.0, 2.0]))


# -- against the exact game --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.xdist_group("relay-full")  # full_relay_run, made once on one worker
def test_d_occ_estimates_the_exact_drift_within_its_noise_floor() -> None:
    """The run's D_occ over (turn, observed symbol) against the exact drift of the same teams;
    an estimated TV is biased upward by sampling noise, by about its measured noise floor."""
    for method in ("teamtr", "naive_sequential"):
        _, report, snaps = full_relay_run(method)
        exact = sum(context_occupancy_tv(GAME, snaps[i], snaps[0]) for i in (1, 2))
        m = report.metrics
        assert exact > 0.05  # the updates moved the occupancy well beyond noise
        assert abs(m["diag/d_occ"] - exact) <= m["diag/d_occ_noise_floor"], method
    # cheap: TeamTR's own training batches are samples of its intermediate teams
    _, report, snaps = run_relay("teamtr", {"level": "cheap", "occupancy": "task"})
    exact = sum(context_occupancy_tv(GAME, snaps[i], snaps[0]) for i in (1, 2))
    assert abs(report.metrics["diag/d_occ"] - exact) < 0.06
    # the marginal over what agents see never exceeds the full-state drift
    assert exact <= sum(occupancy_tv(GAME, snaps[i], snaps[0]) for i in (1, 2)) + 1e-12


def test_importance_weight_ess_matches_the_exact_second_moment() -> None:
    _, report, snaps = run_relay(
        "naive_sequential", {"level": "cheap", "occupancy": "task"}, importance_weighting=True
    )
    for i, u in enumerate(report.updates):
        exact = 1.0 / importance_second_moment(GAME, snaps[0], snaps[i])  # ESS/B as B grows
        assert abs(u.iw_ess_over_b - exact) < 0.03, (i, u.iw_ess_over_b, exact)
    assert report.updates[-1].iw_ess_over_b < 0.95  # the weights are far from uniform


@pytest.mark.xdist_group("relay-full")  # full_relay_run("teamtr"), made once on one worker
def test_measured_improvement_and_certificate_against_the_exact_values() -> None:
    trainer, report, snaps = full_relay_run("teamtr")
    m = report.metrics
    exact_gain = expected_return(GAME, snaps[-1]) - expected_return(GAME, snaps[0])
    # two independent batches of 1024 episodes: the difference has a std of about 0.02
    assert abs(m["diag/j_before"] - expected_return(GAME, snaps[0])) < 0.06
    assert abs(m["diag/improvement"] - exact_gain) < 0.08
    # The certificate is Thm. 3.6 of the logged inputs, in J units (raw centred advantages):
    # gamma = 1 - 1/T, l_seq * m / (1 - 1/G), the kept KL and the zeta proxies.
    ups = report.updates
    g = 4
    cert = certificate_lower_bound(
        [u.l_seq * u.messages / u.episodes / (1 - 1 / g) for u in ups],
        [u.kl_tok for u in ups],
        [u.zeta_proxy for u in ups],
        gamma=1 - 1 / GAME.turns,
        a_max=1.0,
    )
    assert m["diag/certificate_lb"] == pytest.approx(cert.lower_bound)
    assert trainer.diagnostics.gamma == pytest.approx(1 - 1 / GAME.turns)
    # raw advantages, no clipping: zeta_clip = zeta_norm = 0
    assert m["diag/zeta_clip"] == 0 and m["diag/zeta_norm"] == 0
    # its estimated terms against the exact ones of the same updates
    exact_kl = [token_kl(GAME, snaps[i], i, snaps[i + 1][i]) for i in range(3)]
    exact_l = [surrogate(GAME, snaps[i], i, snaps[i + 1][i]) for i in range(3)]
    c = math.sqrt(2) * (1 - 1 / GAME.turns) * GAME.turns**2
    assert m["diag/certificate_kl_term"] == pytest.approx(
        c * sum(math.sqrt(k) for k in exact_kl), rel=0.25
    )
    assert abs(m["diag/certificate_surrogate"] - sum(exact_l)) < 0.05
    assert m["diag/certificate_lb"] <= exact_gain  # the bound holds here (it is loose)


def test_exact_helpers_agree_with_enumeration() -> None:
    """importance_second_moment and context_occupancy_tv against brute-force enumeration."""
    import itertools

    game = RelayGame(2, 2, 1)
    rng = np.random.default_rng(3)
    old = tables([rng.normal(size=(2, 2)) for _ in range(2)])
    new = tables([rng.normal(size=(2, 2)) for _ in range(2)])
    second = 0.0
    for s, y0, y1 in itertools.product(range(2), repeat=3):
        p_old = 0.5 * old[0][s, y0] * old[1][y0, y1]
        p_new = 0.5 * new[0][s, y0] * new[1][y0, y1]
        second += p_new**2 / p_old
    assert importance_second_moment(game, old, new) == pytest.approx(second)
    # turn 0 sees the secret (uniform either way); turn 1 sees y0
    d_old = old[0].mean(axis=0)
    d_new = new[0].mean(axis=0)
    expected = 0.5 * (0.5 * np.abs(d_old - d_new).sum())
    assert context_occupancy_tv(game, old, new) == pytest.approx(expected)


# -- a whole run ---------------------------------------------------------------------------------
@pytest.mark.slow  # a whole run at diagnostics=full; each estimator against the exact values in this file
def test_a_full_run_logs_diagnostics_to_jsonl_tensorboard_and_summary(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from teamtr_core.config import from_dict
    from trainers.run.logger import read_jsonl
    from trainers.run.recipe import run_training

    data = {
        "task": "teamtr/Arith-v0",
        "task_options": {
            "digits": 1,
            "system_prompts": {"solver": "", "critic": "", "aggregator": ""},
        },
        "sampling": {"max_new_tokens": 6},
        "sft": None,
        "schedule": {"stages": 2, "problems_per_batch": 2, "group_size": 2},
        "eval": {"problems": 4, "k": 2},
        "progress": False,
        "plot": False,
        "diagnostics": "full",
        "run_dir": str(tmp_path / "run"),
    }
    out = io.StringIO()
    summary = run_training(from_dict(TrainConfig, data), console=Console(file=out, width=200))
    run_dir = tmp_path / "run"
    records = read_jsonl(run_dir / "metrics.jsonl")
    stage2 = records[2]
    for key in ("diag/d_occ", "diag/certificate_lb", "diag/improvement", "diag/rank_corr"):
        assert key in stage2, key
    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    assert {"diag/d_occ", "diag/certificate_lb", "diag/flip_rate_25"} <= set(acc.Tags()["scalars"])
    saved = json.loads((run_dir / "summary.json").read_text())
    diag = saved["diagnostics"]
    assert diag["level"] == "full" and len(diag["stages"]) == 2
    assert diag["certificate_units"] == "standardised advantages"
    assert diag["occupancy_features"].startswith("(turn, blake2b")
    assert 0 <= diag["violation_rate"] <= 1 and "rank_corr" in diag
    assert summary["diagnostics"]["level"] == "full"
    assert "D_occ" in out.getvalue()  # the per-stage line shows it

    # teamtr diagnostics RUN_DIR: the per-stage table (also of a run in progress) and its JSON
    from teamtr_cli import main

    assert main(["diagnostics", str(run_dir), "--json", str(tmp_path / "d.json")]) == 0
    rows = json.loads((tmp_path / "d.json").read_text())
    assert [r["stage"] for r in rows] == [1, 2]
    assert rows[1]["diag/improvement"] == stage2["diag/improvement"]
    assert main(["diagnostics", str(tmp_path)]) == 2  # not a run: a clear error


def test_flip_rate_matches_the_exact_probability_over_every_token_subset() -> None:
    """The flip-rate estimator against its exact value: with few tokens, every Bernoulli(q)
    subsample can be enumerated."""
    import itertools

    from trainers.optim.kl import monitor_flip_rate

    log_ratio = torch.tensor([[0.02, 0.05], [0.01, 0.0], [0.03, 0.02]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, False], [True, True]])
    cur, new = log_ratio, torch.zeros_like(log_ratio)
    delta, q = 0.04, 0.5
    full = float(log_ratio[mask].sum()) / 3  # Eq. 18: mean over messages of token sums
    cells = [tuple(ix) for ix in mask.nonzero().tolist()]
    exact = 0.0
    for keep in itertools.product((0, 1), repeat=len(cells)):
        p = math.prod(q if k else 1 - q for k in keep)
        est = sum(float(log_ratio[c]) for c, k in zip(cells, keep) if k) / q / 3
        exact += p * ((est <= delta) != (full <= delta))
    gen = torch.Generator().manual_seed(0)
    rate = monitor_flip_rate(cur, new, mask, delta=delta, fraction=q, n_trials=4000, generator=gen)
    assert 0.1 < exact < 0.9
    assert rate == pytest.approx(exact, abs=0.03)


def test_stale_gap_surrogates_estimate_the_exact_ones() -> None:
    """L_stale and L_inter (J units: x R / (1 - 1/G)) against the exact surrogate of the same
    update under the stage-start team and under the intermediate team. (The J batches, which
    this test does not read, are one prompt: their own seeds, so the surrogates are the same.)"""
    diagnostics = {"level": "full", "occupancy": "task", "eval_problems": 1}
    _, report, snaps = run_relay("naive_sequential", diagnostics)
    scale = 1 / (1 - 1 / 4)
    for i, u in list(enumerate(report.updates))[1:]:
        new = snaps[i + 1][i]
        assert abs(u.l_stale * scale - surrogate(GAME, snaps[0], i, new)) < 0.02
        assert abs(u.l_inter * scale - surrogate(GAME, snaps[i], i, new)) < 0.02
