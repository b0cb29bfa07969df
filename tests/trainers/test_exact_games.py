"""Exact team games (trainers/exact/: games.py, stages.py, run.py): the enumerated quantities
against brute force, simulation through the real Runner/TeamEnv and the trainer's KL monitor;
the exactness of TeamTR's surrogate with one round; the finite-horizon certificate; the exact
stage runners; the sampled trainer path; and the benchmark's --quick JSON."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from teamtr_core.policy import SamplingParams
from teamtr_env.runners import Runner
from trainers.exact import games as eg
from trainers.exact import stages as es
from trainers.exact.run import (
    relay_env_fn,
    relay_policies,
    run_sampled,
    sampled_config,
    team_tables,
)
from trainers.optim.kl import token_kl_monitor

ROOT = Path(__file__).resolve().parents[2]


def random_team(game: eg.RelayGame, seed: int, scale: float = 1.0, code: float = 0.0) -> list:
    return eg.tables(eg.random_logits(game, np.random.default_rng(seed), scale, code))


def brute_force_j(game: eg.RelayGame, team: list) -> float:
    """J by summing over every secret and every message path (independent of the recursions)."""
    k, total = game.symbols, 0.0
    for s in range(k):
        for path in itertools.product(range(k), repeat=game.turns):
            prob, x = 1.0 / k, s
            for t, y in enumerate(path):
                prob *= team[game.agent_at(t)][x, y]
                x = y
            total += prob * (path[-1] == s)
    return total


# -- the game and its exact quantities ----------------------------------------------------------
def test_game_validation_and_turns() -> None:
    game = eg.RelayGame(3, 4, 2)
    assert game.turns == 6 and game.turns_of(1) == (1, 4) and game.agent_at(5) == 2
    with pytest.raises(ValueError, match=r"n must be an integer >= 1.*symbols must be"):
        eg.RelayGame(0, 1)
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        eg.RelayGame(2, 3, rounds=0)
    with pytest.raises(ValueError, match="agent index must be in 0..2"):
        game.turns_of(3)


def test_check_team_rejects_bad_tables() -> None:
    game = eg.RelayGame(2, 3)
    good = random_team(game, 0)
    with pytest.raises(ValueError, match="one \\[K, K\\] table per agent \\(2\\), got 1"):
        eg.check_team(game, good[:1])
    with pytest.raises(ValueError, match="row-stochastic"):
        eg.check_team(game, [good[0], good[1] * 1.1])
    with pytest.raises(ValueError, match="must be \\[K, K\\]"):
        eg.check_team(game, [np.eye(2), np.eye(2)])


@pytest.mark.parametrize(
    ("n", "k", "rounds"), [(1, 2, 1), (2, 3, 1), (3, 3, 1), (2, 3, 2), (3, 2, 3)]
)
def test_j_equals_brute_force_enumeration(n: int, k: int, rounds: int) -> None:
    game = eg.RelayGame(n, k, rounds)
    for seed in range(3):
        team = random_team(game, seed, scale=1.5)
        assert eg.expected_return(game, team) == pytest.approx(brute_force_j(game, team), abs=1e-12)
    # the identity code wins surely; a fixed shift by 1 in a 2-agent, K=3 relay never does
    assert eg.expected_return(game, [np.eye(k)] * n) == pytest.approx(1.0)
    if n * rounds % k:
        shift = np.roll(np.eye(k), 1, axis=1)
        assert eg.expected_return(game, [shift] * n) == pytest.approx(0.0)


def test_occupancies_values_and_advantages_are_consistent() -> None:
    game = eg.RelayGame(3, 4, 2)
    team = random_team(game, 1)
    d, v, a = (
        eg.turn_occupancies(game, team),
        eg.turn_values(game, team),
        eg.turn_advantages(game, team),
    )
    assert d.shape == (6, 4, 4) and v.shape == (7, 4, 4) and a.shape == (6, 4, 4, 4)
    np.testing.assert_allclose(d.sum(axis=(1, 2)), 1.0, atol=1e-12)
    np.testing.assert_allclose(d[:, :, :].sum(axis=2), 0.25, atol=1e-12)  # the secret stays uniform
    np.testing.assert_allclose(d[0], np.eye(4) / 4)
    for k in range(3):
        assert eg.agent_occupancy(game, team, k).sum() == pytest.approx(1.0, abs=1e-12)
        assert eg.symbol_occupancy(game, team, k).sum() == pytest.approx(1.0, abs=1e-12)
    for t in range(6):  # E_{m ~ pi} A_t = 0, and J = E_{D_t} V_t at every turn
        p = team[game.agent_at(t)]
        np.testing.assert_allclose((a[t] * p[None]).sum(-1), 0.0, atol=1e-12)
        assert (d[t] * v[t]).sum() == pytest.approx(eg.expected_return(game, team), abs=1e-12)


def test_surrogate_matrix_matches_the_definition() -> None:
    game = eg.RelayGame(2, 3, 2)
    team, new = random_team(game, 2), random_team(game, 3)[1]
    d, a = eg.turn_occupancies(game, team), eg.turn_advantages(game, team)
    direct = sum(
        d[t, s, x] * new[x, m] * a[t, s, x, m]
        for t in game.turns_of(1)
        for s, x, m in itertools.product(range(3), repeat=3)
    )
    assert eg.surrogate(game, team, 1, new) == pytest.approx(direct, abs=1e-14)
    assert eg.surrogate(game, team, 1, team[1]) == pytest.approx(0.0, abs=1e-14)
    terms = eg.surrogate_terms(game, team, 1)
    np.testing.assert_allclose(terms.g, eg.surrogate_matrix(game, team, 1), atol=1e-14)
    # with a huge clip range the clipped surrogate is the plain one
    assert eg.clipped_surrogate(terms, new, 1e9) == pytest.approx(direct, abs=1e-12)


@pytest.mark.parametrize("ratio_clip", [None, 0.2])
def test_objective_gradient_matches_finite_differences(ratio_clip: float | None) -> None:
    game = eg.RelayGame(3, 3, 2)
    team = random_team(game, 4)
    terms = eg.surrogate_terms(game, team, 1)
    z = np.log(team[1]) + 0.3 * np.random.default_rng(5).standard_normal((3, 3))
    _, grad = eg.objective_and_grad(terms, z, 0.5, ratio_clip)
    h, numeric = 1e-6, np.zeros_like(z)
    for idx in itertools.product(range(3), range(3)):
        e = np.zeros_like(z)
        e[idx] = h
        plus = eg.objective_and_grad(terms, z + e, 0.5, ratio_clip)[0]
        minus = eg.objective_and_grad(terms, z - e, 0.5, ratio_clip)[0]
        numeric[idx] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(grad, numeric, atol=1e-8)


def test_token_kl_and_occupancy_tv() -> None:
    game = eg.RelayGame(2, 3, 2)
    team = random_team(game, 6)
    new = random_team(game, 7)[0]
    rho = eg.symbol_occupancy(game, team, 0)
    assert eg.token_kl(game, team, 0, new) == pytest.approx(
        float(rho @ eg.state_kl(team[0], new)), abs=1e-14
    )
    assert eg.token_kl(game, team, 0, team[0]) == 0.0
    other = [new, team[1]]
    tv = eg.occupancy_tv(game, team, other)
    assert tv == pytest.approx(eg.occupancy_tv(game, other, team)) and 0 < tv <= 1
    assert eg.occupancy_drift(game, [team, team, other]) == pytest.approx(tv)
    assert eg.occupancy_drift(game, [team]) == 0.0


# -- against the real machinery (sampled) -------------------------------------------------------
def rollouts(game: eg.RelayGame, team_logits: list, n_problems: int, group: int, seed: int):
    runner = Runner(
        relay_env_fn(game),
        relay_policies(game, team_logits, seed=seed),
        SamplingParams(temperature=1.0),
        progress=False,
    )
    return runner, runner.rollout(runner.sample_problems(n_problems, seed=seed), group, seed=seed)


def test_j_by_simulation_through_runner_and_team_env() -> None:
    game = eg.RelayGame(3, 3, 2)
    logits = eg.random_logits(game, np.random.default_rng(8), 1.0, 2.0)
    runner, batch = rollouts(game, logits, 400, 4, seed=1)
    r = batch.rewards()
    assert len(r) == 1600 and all(ep.turns == 6 for ep in batch.episodes)
    exact = eg.expected_return(game, team_tables(game, runner.policies))
    assert exact == pytest.approx(eg.expected_return(game, eg.tables(logits)), abs=1e-12)
    se = math.sqrt(exact * (1 - exact) / len(r))
    assert abs(float(r.mean()) - exact) < 4 * se, (float(r.mean()), exact, se)


def test_token_kl_monitor_on_samples_estimates_the_exact_kl_tok() -> None:
    game = eg.RelayGame(2, 3, 2)
    logits = eg.random_logits(game, np.random.default_rng(9), 1.0, 2.0)
    runner, batch = rollouts(game, logits, 500, 2, seed=2)
    new_logits = logits[1] + 0.4 * np.random.default_rng(10).standard_normal((3, 3))
    old_policy = runner.policies["a2"]
    new_policy = relay_policies(game, [logits[0], new_logits])["a2"]
    msgs = batch.messages_of("a2")
    assert len(msgs) == 2000  # R = 2 messages per episode
    prompts, ids = [m.context for m in msgs], [list(m.token_ids) for m in msgs]
    with torch.no_grad():
        cur, new = old_policy.logprobs(prompts, ids), new_policy.logprobs(prompts, ids)
    est = token_kl_monitor(cur.logprobs, new.logprobs, cur.mask)
    (p_new,) = eg.tables([new_logits])
    exact = eg.token_kl(game, eg.tables(logits), 1, p_new)
    se = float(est.per_message.std()) / math.sqrt(est.n_messages)
    assert abs(est.value - exact) < 4 * se, (est.value, exact, se)


# -- surrogates and the certificate -------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 5])
def test_one_round_teamtr_surrogate_is_exact(n: int) -> None:
    game = eg.RelayGame(n, 4, 1)
    settings = es.ExactSettings(steps=5, lr=0.3, delta=0.02)
    for seed in range(3):
        logits = eg.random_logits(game, np.random.default_rng(seed), 1.0, 4.0)
        _, stage = es.run_exact_stage(game, logits, "teamtr", settings)
        assert stage.l_used == pytest.approx(stage.j_after - stage.j_before, abs=1e-9)
        assert stage.surrogate_error < 1e-9 and stage.update_error < 1e-9
        assert stage.improvement != 0.0
        for u in stage.updates:
            assert u.l_seq == pytest.approx(u.improvement, abs=1e-12)
            assert u.lower_bound == pytest.approx(u.improvement, abs=1e-12)  # no penalty, R = 1


@pytest.mark.parametrize("n", [3, 4])
def test_naive_stale_surrogate_error_is_positive(n: int) -> None:
    game = eg.RelayGame(n, 4, 1)
    for seed in range(3):
        logits = eg.random_logits(game, np.random.default_rng(seed), 1.0, 4.0)
        _, stage = es.run_exact_stage(game, logits, "naive_sequential", es.ExactSettings())
        assert stage.surrogate_error > 1e-6
        assert stage.delta_stale > 1e-6
        first = stage.updates[0]  # the first update of a stage is fresh
        assert first.l_stale == pytest.approx(first.l_seq, abs=1e-14)
        assert stage.d_occ > 0


def test_two_rounds_make_teamtr_inexact() -> None:
    game = eg.RelayGame(3, 4, 2)
    errors = []
    for seed in range(3):
        logits = eg.random_logits(game, np.random.default_rng(seed), 1.0, 4.0)
        _, stage = es.run_exact_stage(game, logits, "teamtr", es.ExactSettings())
        errors.append(stage.surrogate_error)
    assert max(errors) > 1e-6


@pytest.mark.parametrize(("n", "rounds"), [(1, 2), (2, 1), (2, 2), (3, 2), (2, 3), (4, 2)])
def test_certificate_never_exceeds_the_true_improvement(n: int, rounds: int) -> None:
    game = eg.RelayGame(n, 3, rounds)
    rng = np.random.default_rng(100 * n + rounds)
    slack = []
    for trial in range(60):
        team = eg.tables(eg.random_logits(game, rng, 1.0, float(trial % 4)))
        k = int(rng.integers(n))
        size = [0.05, 0.3, 1.0, 3.0][trial % 4]
        (new,) = eg.tables([np.log(team[k]) + size * rng.standard_normal((3, 3))])
        after = [*team[:k], new, *team[k + 1 :]]
        gain = eg.expected_return(game, after) - eg.expected_return(game, team)
        cert = es.update_certificate(game, team, k, new)
        assert cert.lower_bound <= gain + 1e-12
        assert cert.l_seq == pytest.approx(eg.surrogate(game, team, k, new), abs=1e-12)
        assert cert.kl_tok == pytest.approx(eg.token_kl(game, team, k, new), abs=1e-12)
        radius = es.radius_penalty(rounds, cert.kl_tok)
        assert cert.penalty <= radius + 1e-12  # the delta form is looser still
        if game.turns >= 2:
            paper = es.paper_certificate(game, [cert.l_seq], [cert.kl_tok]).lower_bound
            assert paper <= cert.lower_bound + 1e-12
        slack.append(gain - cert.l_seq)
    if rounds > 1:  # the surrogate alone is not a lower bound: the penalty is needed
        assert min(slack) < -1e-6


def test_radius_penalty_values() -> None:
    assert es.radius_penalty(1, 0.01) == 0.0
    assert es.radius_penalty(2, 0.01) == pytest.approx(2 * math.sqrt(0.01))
    assert es.radius_penalty(3, 0.02, a_max=0.5) == pytest.approx(math.sqrt(2 * 3 * 5 * 0.02) / 2)


@pytest.mark.parametrize("method", es.METHODS)
def test_exact_stages_certificates_hold(method: es.Method) -> None:
    game = eg.RelayGame(3, 3, 2)
    settings = es.ExactSettings(delta=0.02)
    for seed in range(4):
        logits = eg.random_logits(game, np.random.default_rng(seed), 1.0, 3.0)
        _, stages = es.run_exact(game, logits, method, settings, 3)
        for stage in stages:
            assert stage.certificate <= stage.improvement + 1e-12
            assert stage.certificate_paper <= stage.certificate + 1e-12
            if stage.all_in_region:
                assert stage.certificate_radius <= stage.improvement + 1e-12
            assert sum(u.improvement for u in stage.updates) == pytest.approx(stage.improvement)
            for u in stage.updates:
                assert u.kl_used <= settings.delta + 1e-12
                if method == "teamtr":
                    assert u.kl_used == pytest.approx(u.kl_tok, abs=1e-12) and u.in_region
                    assert u.l_used == u.l_seq
                else:
                    assert u.l_used == u.l_stale


def test_stage_runner_equal_budget_and_validation() -> None:
    game = eg.RelayGame(2, 3)
    logits = eg.random_logits(game, np.random.default_rng(0), 1.0, 2.0)
    before = [z.copy() for z in logits]
    new, stage = es.run_exact_stage(game, logits, "teamtr", es.ExactSettings(), order=[1, 0])
    assert [u.agent for u in stage.updates] == [1, 0]
    assert all(np.array_equal(a, b) for a, b in zip(logits, before))  # inputs untouched
    assert eg.expected_return(game, eg.tables(new)) == pytest.approx(stage.j_after)
    with pytest.raises(ValueError, match="method must be one of"):
        es.run_exact_stage(game, logits, "joint", es.ExactSettings())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="permutation of 0..1"):
        es.run_exact_stage(game, logits, "teamtr", es.ExactSettings(), order=[0, 0])
    with pytest.raises(ValueError, match="steps must be an integer >= 1.*delta must be > 0"):
        es.ExactSettings(steps=0, delta=0.0)
    # a radius too small for any halved step: the update is reverted, J unchanged
    _, tiny = es.run_exact_stage(
        game, logits, "teamtr", es.ExactSettings(delta=1e-30, max_backtracks=2)
    )
    assert not any(u.accepted for u in tiny.updates) and tiny.improvement == 0.0


# -- the sampled trainer path -------------------------------------------------------------------
def test_sampled_run_through_team_trainer() -> None:
    game = eg.RelayGame(2, 3, 2)
    logits = eg.random_logits(game, np.random.default_rng(11), 1.0, 3.0)
    cfg = sampled_config("teamtr", schedule={"problems_per_batch": 4, "group_size": 4})
    (stage,) = run_sampled(game, logits, cfg, 1)
    assert stage.method == "teamtr" and len(stage.l_hat) == 2
    assert sum(stage.improvement) == pytest.approx(stage.j_after - stage.j_before, abs=1e-12)
    assert stage.j_before == pytest.approx(eg.expected_return(game, eg.tables(logits)))
    assert all(math.isfinite(x) for x in (*stage.l_hat, *stage.kl_tok, stage.surrogate_error))
    with pytest.raises(ValueError, match="normalize_advantages must be false"):
        run_sampled(game, logits, sampled_config("teamtr", optim={"normalize_advantages": True}), 1)


@pytest.mark.slow
def test_benchmark_quick_json(tmp_path: Path) -> None:
    out = tmp_path / "exact.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "exact_team.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    for method in ("naive", "teamtr"):
        alpha = data["alpha"][method]
        assert math.isfinite(alpha["value"]) and len(alpha["ci"]) == 2
        assert alpha["ci"][0] <= alpha["value"] <= alpha["ci"][1]
        final = data["final_J"][method]
        assert 0 <= final["mean"] <= 1 and final["ci"][0] <= final["mean"] <= final["ci"][1]
    assert data["certificate"]["violations"] == 0
    assert data["certificate"]["stages"] >= 1
    assert "Surrogate error" in proc.stdout
