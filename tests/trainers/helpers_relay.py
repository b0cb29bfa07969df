"""The 3-agent relay (K = 3, one round) of the diagnostics tests, and one stage of it with big
batches; the run with full diagnostics that several tests read is made once per process
(:func:`full_relay_run`; its tests share an ``xdist_group`` so that one worker makes it)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from trainers.exact.games import RelayGame, random_logits
from trainers.exact.run import Method, relay_env_fn, relay_policies, sampled_config, team_tables
from trainers.learners.callbacks import OnUpdate
from trainers.learners.team_trainer import TeamTrainer

GAME = RelayGame(3, 3, 1)


def run_relay(method: Method, diagnostics: dict, seed: int = 1, **options: Any) -> Any:
    """One stage of the 3-agent relay (K = 3) with big batches: ``(trainer, report, snaps)``,
    the team's exact tables before the stage and after every update in ``snaps``."""
    logits = random_logits(GAME, np.random.default_rng(seed))
    cfg = sampled_config(
        method,
        diagnostics=diagnostics,
        schedule={"problems_per_batch": 256, "group_size": 4},
        learner_options=options,
        optim={"lr": 0.5},
        trust_region={"delta": 0.3},
    )
    policies = relay_policies(GAME, logits, seed=0)
    snaps = [team_tables(GAME, policies)]
    watch = OnUpdate(lambda record: snaps.append(team_tables(GAME, policies)))
    trainer = TeamTrainer(cfg, relay_env_fn(GAME), policies, callbacks=[watch])
    report = trainer.run_stage()
    return trainer, report, snaps


@functools.cache
def full_relay_run(method: Method) -> Any:
    """``run_relay(method, full diagnostics, task occupancy)``, made once per process (read it,
    never change it)."""
    return run_relay(method, {"level": "full", "occupancy": "task"})
