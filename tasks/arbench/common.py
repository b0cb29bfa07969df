"""Argument checks, context helpers and the case-pool base shared by the ARBench plugins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.arbench import data
from tasks.base import SPLITS, InteractiveTask, Problem, Split

DEFAULT_ROUNDS = 25  # AR-Bench's max_turn


def check_common(max_rounds: object, split: object, data_split: object) -> list[str]:
    """Errors in the options every ARBench game takes (empty when all are valid)."""
    errors = []
    if (
        not isinstance(max_rounds, int)
        or isinstance(max_rounds, bool)
        or not 1 <= max_rounds <= 1000
    ):
        errors.append(f"max_rounds must be an integer in 1..1000, got {max_rounds!r}")
    for name, value in (("split", split), ("data_split", data_split)):
        if value not in SPLITS:
            errors.append(f"{name} must be one of {SPLITS}, got {value!r}")
    return errors


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


class CasePoolTask(InteractiveTask):
    """An ARBench game over a fixed pool of cases (SP, DC): ``sample`` draws uniformly from
    ``data_file`` or the bundled demo cases, ``load`` reads official files (or the project's JSONL)
    labelled ``data_split``. Subclasses set ``bundled_file`` and ``convert``."""

    bundled_file: str = ""
    convert: data.Converter

    def _open_pool(self, data_file: str | None, split: Split, data_split: Split) -> None:
        self.split: Split = split
        self.data_split: Split = data_split
        self._pool = (
            data.load_file(data_file, self.convert, split)
            if data_file
            else data.bundled(self.bundled_file, self.convert, split)
        )

    def sample(self, rng: np.random.Generator) -> Problem:
        """One case of ``data_file`` (default: the bundled demo cases), uniformly."""
        return self._pool[int(rng.integers(len(self._pool)))]

    def load(self, path: str | Path) -> list[Problem]:
        """AR-Bench's official JSON (``data/sp|dc/*.json``) or the project's JSONL."""
        return data.load_file(path, self.convert, self.data_split)
