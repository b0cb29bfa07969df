"""Every seed stream in one place: :func:`derive_seed` and the named constants it is called with.

A random draw derives from the run's seed and a stream, e.g. the rollouts an update trains on use
``derive_seed(seed, TRAIN_STREAM, stage, index)``, so that different streams never share draws and
a resumed run repeats an uninterrupted one. Changing a number here changes the numbers of every
run (the golden tests in ``tests/trainers/test_learners.py`` pin them).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def seed_errors(value: Any) -> list[str]:
    """The field check of a config's ``seed``: NumPy's seeding takes non-negative integers."""
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [f"must be a non-negative integer (0, 1, 2, ...), got {value}"]
    return []


def derive_seed(*parts: int) -> int:
    """A 32-bit seed from integers, independent across different ``parts`` (NumPy SeedSequence)."""
    return int(np.random.SeedSequence([abs(int(p)) for p in parts]).generate_state(1)[0])


# Training (trainers.learners.team_trainer; the sample indices also trainers.learners.stage_diagnostics):
# derive_seed(config.seed, STREAM, stage[, index]).
ORDER_STREAM = 11  # a stage's update order of the agents (schedule.order: random)
TRAIN_STREAM = 13  # the rollouts an agent's update trains on
DIAG_STREAM = 17  # the diagnostic rollouts (stale gap, D_occ, J before and after a stage)
PROBLEM_STREAM = 19  # the problems of a training or diagnostic batch, from that batch's seed
STALE_INDEX = 1_000  # sample index of the stage-start diagnostic batches (updates use 0..n-1)
J_INDEX = 2_000  # sample index of the batches that measure J before and after a stage

# Runs around the training loop (trainers.run.team_eval, trainers.tools.swap, trainers.optim.sft).
EVAL_STREAM = 999_983  # every evaluation's problems and rollouts (the same before and after)
PROBE_STREAM = 23  # a model swap's probe rollouts (the contexts the new model aligns on)
SFT_STREAM = 1_031  # behaviour cloning's minibatches: derive_seed(seed, agent index, this)
INIT_STREAM = 1_033  # a team's fresh weights (new LoRA adapters): ((seed, this), agent position)

# Rollouts (teamtr_env.runners): derive_seed(rollout seed, ...).
CALL_STREAM = 7_919  # each policy call: derive_seed(call seed, step, agent index, this)
GANG_STREAM = 104_723  # a gang rank's k-th unseeded generate call: derive_seed(0, this, k)
SHARD_STREAM = 104_729  # the policy calls of block k > 0 of a sharded rollout

# Fixed seeds and offsets (trainers.optim.update, trainers.tools.align, adapters.vllm_policy).
MONITOR_SEED = 0  # the messages the trust-region monitor checks (the same every backtrack)
SEED_STRIDE = 1_000_003  # spaces per-item seeds: seed * SEED_STRIDE + i (vLLM prompts, align steps)
ALIGN_BATCH_OFFSET = 1  # alignment's minibatch draws: random.Random(seed + ALIGN_BATCH_OFFSET)
ALIGN_CHECK_OFFSET = 7  # alignment's held-out check messages, sampled with seed + this every check
