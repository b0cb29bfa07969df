"""Every generator of a registered task respects the split discipline: a task made with
``split=S`` yields only problems labelled S whose id hashes to S, so held-out problems never appear
in training. Tasks that sample a handful of bundled cases instead of generating are listed here and
documented in docs/tasks.md."""

from __future__ import annotations

import numpy as np
import pytest

import teamtr_env
from tasks import split_of

# Bundled demo cases (3 situation puzzles, 3 detective cases, 12 store tasks): too few to split;
# their real test sets come from files (--data-path), which load as "test".
BUNDLED = {"teamtr/ARBench-SP-v0", "teamtr/ARBench-DC-v0", "teamtr/ToolUse-v0"}
GENERATED = sorted(
    t
    for t in teamtr_env.registry
    if t.startswith("teamtr/") and t not in BUNDLED and teamtr_env.spec(t).accepts("split")
)


def test_the_builtin_generators_are_all_checked() -> None:
    assert {"teamtr/Arith-v0", "teamtr/Math-v0", "teamtr/ZebraLogic-v0"} <= set(GENERATED)


@pytest.mark.parametrize("task_id", GENERATED)
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_generated_problems_stay_in_their_split(task_id: str, split: str) -> None:
    task = teamtr_env.make(task_id, split=split).task
    rng = np.random.default_rng(0)
    for _ in range(12):
        problem = task.sample(rng)
        assert problem.split == split
        assert split_of(problem.id) == split, problem.id
