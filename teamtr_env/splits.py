"""How many distinct problems each split of a generated task holds, for given options.

A small generator (a reasoning-gym dataset at a low curriculum level, 1-digit arithmetic) repeats
itself, so a held-out evaluation of N problems may find fewer than N distinct ones.
:func:`count_split_problems` draws from each split's generator and counts what it found, and
checks that no problem is in two splits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.base import SPLITS
from teamtr_core.errors import ConfigError
from teamtr_env.registration import registry as default_registry


@dataclass(frozen=True)
class SplitCount:
    """What drawing ``draws`` problems from one split found.

    Attributes:
        split: ``"train"``, ``"validation"`` or ``"test"``.
        draws: problems drawn.
        distinct: distinct problems (by id) among them.
        shared: of those, how many another split also drew (0 for a sound task).
    """

    split: str
    draws: int
    distinct: int
    shared: int = 0

    @property
    def exhausted(self) -> bool:
        """Whether the draws repeated problems often (fewer than 90% distinct): the split holds
        about ``distinct`` problems, not more."""
        return self.distinct < 0.9 * self.draws


MAX_DRAWS = 100_000
"""The most problems :func:`count_split_problems` draws from one split: enough to tell a split of
tens of thousands of problems from a larger one; a generator in worker processes (reasoning-gym)
draws a few thousand a second, so this takes minutes."""


def count_split_problems(
    task_id: str,
    draws: int = 1000,
    seed: int = 0,
    splits: Sequence[str] = SPLITS,
    registry: Any = None,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> list[SplitCount]:
    """Draws ``draws`` problems from each split of ``task_id`` (made with ``options`` and
    ``split=S``) and counts the distinct ones and those two splits share. ``progress`` is
    called with the number of problems drawn so far (all splits), every 100 draws.

    Raises:
        ConfigError: the task takes no ``split`` option (it has no generated splits), ``draws``
            outside 1..:data:`MAX_DRAWS`, or bad options (every problem listed).
    """
    registry = registry or default_registry
    spec = registry.spec(task_id)
    if not spec.accepts("split"):
        raise ConfigError(
            f"splits of {task_id}", ["the task takes no 'split' option: it has no generated splits"]
        )
    if not 1 <= draws <= MAX_DRAWS:
        raise ConfigError(f"splits of {task_id}", [f"draws must be in 1..{MAX_DRAWS}, got {draws}"])
    found: dict[str, set[str]] = {}
    done = 0
    for split in splits:
        task = registry.make(task_id, **{**options, "split": split}).task
        rng = np.random.default_rng(seed)
        ids = found[split] = set()
        for _ in range(draws):
            ids.add(task.sample(rng).id)
            done += 1
            if progress is not None and done % 100 == 0:
                progress(done)
    counts = []
    for split in splits:
        others = set().union(*(ids for s, ids in found.items() if s != split))
        counts.append(SplitCount(split, draws, len(found[split]), len(found[split] & others)))
    return counts
