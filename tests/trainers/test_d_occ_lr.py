"""D_occ by likelihood ratios (:mod:`trainers.diagnostics.d_occ_lr`): against the exact relay,
where the TV between two teams' occupancies over histories is computed by enumeration, and as a
run logs it at ``diagnostics: full``."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from helpers_relay import GAME, full_relay_run

from teamtr_core.policy import SamplingParams
from teamtr_env.runners import Runner
from trainers.diagnostics.d_occ_lr import DOccLR
from trainers.diagnostics.estimators import (
    context_log_weights,
    ratio_total_variation,
    total_variation,
)
from trainers.exact.games import (
    history_occupancy_tv,
    occupancy_tv,
    random_logits,
    tables,
)
from trainers.exact.run import agent_names, relay_env_fn, relay_policies
from trainers.optim.scoring import concat_logprobs, scored


def _score(policies: dict[str, Any]) -> Any:
    def each(agent: str, messages: list[Any]) -> np.ndarray:  # each message's log-probability
        lp, mask = concat_logprobs(scored(policies[agent], messages, 256))
        return (lp.double() * mask).sum(-1).numpy()

    return each


def _set(policies: dict[str, Any], logits: list[np.ndarray]) -> None:
    for name, z in zip(agent_names(GAME), logits, strict=True):
        with torch.no_grad():
            policies[name].logits.copy_(torch.as_tensor(z))


def test_the_log_weight_of_a_context_sums_its_earlier_messages_ratios() -> None:
    episodes, turns = [1, 0, 0, 1, 0], [0, 2, 0, 1, 1]
    ratios = [0.5, 0.1, 0.2, 0.3, 0.4]
    assert context_log_weights(episodes, turns, ratios).tolist() == pytest.approx(
        [0.0, 0.6, 0.0, 0.5, 0.2]
    )


def test_the_ratio_estimate_needs_no_context_to_repeat() -> None:
    """Contexts from a million, nearly all drawn once: the plug-in TV between two samples of the
    SAME distribution is near its ceiling of 1 (the truth is 0), while the ratio estimate of the
    TV to another distribution is the true value within its standard error."""
    rng = np.random.default_rng(0)
    size = 1_000_000
    p = rng.dirichlet(np.ones(size))
    q = 0.7 * p + 0.3 * rng.dirichlet(np.ones(size))
    draws = rng.choice(size, size=4000, p=p)
    assert total_variation(list(draws[:2000]), list(draws[2000:])) > 0.95
    estimate, se = ratio_total_variation(np.log(q[draws] / p[draws]), list(range(4000)))
    assert abs(estimate - 0.5 * np.abs(p - q).sum()) < 4 * se


def _start() -> list[np.ndarray]:
    return random_logits(GAME, np.random.default_rng(1), scale=1.0)


@functools.lru_cache(maxsize=1)
def _start_batch() -> Any:
    """2,000 episodes of the start team (one batch for the three cases below: a batch is data,
    and each case scores it with policies of its own)."""
    policies = relay_policies(GAME, _start())
    runner = Runner(relay_env_fn(GAME), policies, SamplingParams(temperature=1.0), progress=False)
    # sampled at the temperature the ratios are scored at (the trainer scores an agent's
    # messages at its sampling temperature)
    return runner.rollout(runner.sample_problems(500, seed=0, distinct=False), group_size=4, seed=3)


@pytest.mark.parametrize("changed", [[0], [0, 1], [1, 2]])
def test_the_ratio_estimate_matches_the_exact_history_tv_of_the_relay(changed: list[int]) -> None:
    start = _start()
    moved = [
        z + (1.5 * np.random.default_rng(k).normal(size=z.shape) if k in changed else 0)
        for k, z in enumerate(start)
    ]
    policies = relay_policies(GAME, start)
    batch = _start_batch()
    names = agent_names(GAME)
    drift = DOccLR(batch, names, _score(policies), dict.fromkeys(names, 0))
    assert drift.term() == 0.0  # the team has not moved
    _set(policies, moved)
    drift.updated({name: int(k in changed) for k, name in enumerate(names)})
    estimate = drift.term()
    total, se = drift.total()
    exact = history_occupancy_tv(GAME, tables(moved), tables(start))
    assert total == pytest.approx(estimate)
    assert abs(estimate - exact) < 4 * se + 1e-9, (estimate, exact, se)
    # histories are finer than the Markov state (turn, secret, symbol seen)
    assert exact >= occupancy_tv(GAME, tables(moved), tables(start)) - 1e-12


# naive sequential's run: the same logging path as TeamTR's (the exact drift of both learners'
# histories is checked without a run in this file)
@pytest.mark.parametrize(
    "learner", [pytest.param("naive_sequential", marks=pytest.mark.slow), "teamtr"]
)
@pytest.mark.xdist_group("relay-full")  # full_relay_run("teamtr"), made once on one worker
def test_a_run_logs_the_ratio_drift_and_it_matches_the_exact_one(learner: str) -> None:
    """The relay stage that test_stage_diagnostics.py's measured-improvement test reads too
    (3 agents, K = 3, full diagnostics)."""
    _, report, snaps = full_relay_run(learner)
    terms = [u.d_occ_lr_term for u in report.updates]
    assert np.isnan(terms[0]) and all(np.isfinite(terms[1:]))
    # the drift of the history before each update after the first, from the stage's start
    exact = [history_occupancy_tv(GAME, snaps[i], snaps[0]) for i in (1, 2)]
    se = report.metrics["diag/d_occ_lr_se"]
    assert report.metrics["diag/d_occ_lr"] == pytest.approx(sum(terms[1:]))
    assert abs(report.metrics["diag/d_occ_lr"] - sum(exact)) < 4 * se + 1e-9
    assert sum(exact) > 0.05  # the updates moved the team: the check is not of zeros
