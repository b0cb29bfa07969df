"""Argument checks and context helpers shared by the three ARBench plugins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.base import SPLITS

DEFAULT_ROUNDS = 25  # AR-Bench's max_turn


def check_common(max_rounds: object, split: object, data_split: object) -> list[str]:
    """Problems with the options every ARBench game takes (empty when all are valid)."""
    problems = []
    if (
        not isinstance(max_rounds, int)
        or isinstance(max_rounds, bool)
        or not 1 <= max_rounds <= 1000
    ):
        problems.append(f"max_rounds must be an integer in 1..1000, got {max_rounds!r}")
    for name, value in (("split", split), ("data_split", data_split)):
        if value not in SPLITS:
            problems.append(f"{name} must be one of {SPLITS}, got {value!r}")
    return problems


def env_turns(context: str, task_name: str) -> int:
    """How many environment replies of ``task_name`` a rendered context shows (one per turn)."""
    return context.count(f"\n### {task_name}\n")


def mean_details(details: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    """The mean of each numeric ``details[key]`` over the episodes that have it (the evaluation
    report's ``task_metrics``)."""
    out = {}
    for key in keys:
        values = [float(d[key]) for d in details if isinstance(d.get(key), int | float)]
        if values:
            out[key] = sum(values) / len(values)
    return out
