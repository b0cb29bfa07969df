"""``task_schedule``: task options by training stage (a curriculum over stages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TaskStage", "schedule_errors", "scheduled_options"]


def schedule_errors(value: Any) -> list[str]:
    """The field check of ``task_schedule``: stages from 1, each named once."""
    if not isinstance(value, list):
        return []
    starts = [entry.get("from_stage", 1) for entry in value if isinstance(entry, Mapping)]
    errors = [
        f"from_stage: expected a stage >= 1, got {s}"
        for s in starts
        if isinstance(s, int) and not isinstance(s, bool) and s < 1
    ]
    repeated = sorted({s for s in starts if isinstance(s, int) and starts.count(s) > 1})
    return errors + [f"from_stage {s} is given more than once" for s in repeated]


@dataclass(frozen=True)
class TaskStage:
    """One entry of ``task_schedule``: task options for the training problems from a stage on."""

    from_stage: int = field(
        default=1,
        metadata={"help": "the first training stage (1-based) these options apply to"},
    )
    options: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "task options merged over task_options (and earlier entries)"},
    )


def scheduled_options(
    options: dict[str, Any], schedule: Sequence[TaskStage], stage: int
) -> dict[str, Any]:
    """The task options of training stage ``stage`` (1-based): ``options`` with every schedule
    entry up to ``stage`` merged over them, in stage order."""
    merged = dict(options)
    for entry in sorted(schedule, key=lambda e: e.from_stage):
        if entry.from_stage <= stage:
            merged.update(entry.options)
    return merged
