"""``task_schedule``: task options by training stage (a curriculum over stages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TaskStage", "schedule_errors", "schedule_stage_errors", "scheduled_options"]


def schedule_errors(value: Any) -> list[str]:
    """The field check of ``task_schedule``: stages from 1, each named once (an entry without
    ``from_stage`` is reported by the config's own check, as a missing key)."""
    if not isinstance(value, list):
        return []
    starts = [
        entry["from_stage"]
        for entry in value
        if isinstance(entry, Mapping) and "from_stage" in entry
    ]
    errors = [
        f"from_stage: expected a stage >= 1, got {s}"
        for s in starts
        if isinstance(s, int) and not isinstance(s, bool) and s < 1
    ]
    repeated = sorted({s for s in starts if isinstance(s, int) and starts.count(s) > 1})
    return errors + [f"from_stage {s} is given more than once" for s in repeated]


def schedule_stage_errors(data: Mapping[str, Any], stages: int) -> list[str]:
    """``task_schedule`` entries that start after the run's last stage (``schedule.stages``):
    they would never apply, so they are refused."""
    value = data.get("task_schedule")
    if not isinstance(value, list) or isinstance(stages, bool) or not isinstance(stages, int):
        return []
    late = sorted(
        entry["from_stage"]
        for entry in value
        if isinstance(entry, Mapping)
        and isinstance(entry.get("from_stage"), int)
        and entry["from_stage"] > stages
    )
    return [
        f"task_schedule: from_stage {s} is after the run's last stage (schedule.stages = "
        f"{stages}), so its options would never apply; lower it or raise schedule.stages"
        for s in late
    ]


@dataclass(frozen=True)
class TaskStage:
    """One entry of ``task_schedule``: task options for the training problems from a stage on."""

    from_stage: int = field(
        metadata={"help": "the first training stage (1-based) these options apply to (required)"},
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
