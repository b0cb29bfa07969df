"""Training from Python in one call: :func:`train`, the path ``teamtr train`` takes (the command
line calls it), with the run's directory, summary and trained team in a :class:`RunResult`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from teamtr_core.config import Override, build_config, keyword_overrides, to_dict
from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
from trainers.learners.callbacks import Callback
from trainers.learners.registry import learner_errors, learner_id_errors
from trainers.optim.records import UpdateRecord
from trainers.run.config_file import load_train_config
from trainers.run.logger import MetricsLogger
from trainers.run.recipe import TrainingRecipe

__all__ = ["RunResult", "train"]


@dataclass(frozen=True)
class RunResult:
    """What :func:`train` returns.

    Attributes:
        run_dir: the run directory (``config.yaml``, ``metrics.jsonl``, checkpoints,
            ``summary.json``).
        config: the configuration the run trained with.
        summary: ``summary.json``'s content: held-out metrics before and after, totals, every
            update's record. The fields read most have typed properties: :attr:`before`,
            :attr:`after` (and their intervals), :attr:`stages`, :attr:`wall_s`,
            :attr:`updates`.
        team: the trained team, agent -> policy (it can sample: ``team["solver"].generate``).
    """

    run_dir: Path
    config: TrainConfig
    summary: dict[str, Any]
    team: dict[str, Any] = field(default_factory=dict)

    @property
    def before(self) -> dict[str, float]:
        """The held-out evaluation before training."""
        return dict(self.summary.get("before", {}))

    @property
    def after(self) -> dict[str, float]:
        """The held-out evaluation after training."""
        return dict(self.summary.get("after", {}))

    @property
    def before_ci(self) -> dict[str, tuple[float, float]]:
        """The 95% bootstrap interval over distinct problems of each metric in :attr:`before`."""
        return _intervals(self.summary.get("before_ci", {}))

    @property
    def after_ci(self) -> dict[str, tuple[float, float]]:
        """The 95% bootstrap interval over distinct problems of each metric in :attr:`after`."""
        return _intervals(self.summary.get("after_ci", {}))

    @property
    def stages(self) -> int:
        """The stages the run has trained (fewer than ``schedule.stages`` after an early stop)."""
        return int(self.summary["stages"])

    @property
    def wall_s(self) -> float:
        """The run's wall time in seconds (behaviour cloning, training and evaluations)."""
        return float(self.summary["wall_s"])

    @property
    def updates(self) -> list[UpdateRecord]:
        """Every agent update's record, in the order they ran (KL, trust region, loss, ...)."""
        return [UpdateRecord.from_dict(u) for u in self.summary.get("updates", [])]


def _intervals(data: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    return {name: (float(low), float(high)) for name, (low, high) in data.items()}


def train(
    config: TrainConfig | str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    hooks: Sequence[Callback] = (),
    metric_loggers: Sequence[MetricsLogger] = (),
    **settings: Any,
) -> RunResult:
    """Trains a team, as ``teamtr train`` does (the command calls this).

    Args:
        config: a :class:`~trainers.config.TrainConfig`, the path of a training config file
            (YAML/JSON), its content as a mapping (``{"schedule": {"stages": 2}}``, read as the
            file would be), or ``None`` for the demo's defaults.
        overrides: a list of ``KEY=VALUE`` strings, as ``teamtr train --set`` takes them
            (``["schedule.stages=2"]``; a bare string is refused, not split into characters).
        resume: continue the run in ``run_dir`` after its last intact checkpoint.
        overwrite: replace the run already in ``run_dir``.
        console: where to print (default: the terminal).
        hooks: :class:`~trainers.learners.callbacks.Callback` objects (the config's
            ``callbacks`` key names callbacks by import path).
        metric_loggers: extra metric loggers (``log(metrics, step)`` and ``close()``; the
            config's ``loggers`` key names the built-in ones).
        **settings: config settings as keywords, applied after ``overrides``: a section as a
            mapping (``schedule={"stages": 2}``) or a top-level value (``run_dir="runs/x"``);
            ``task_options`` replaces the task's options whole.

    Returns:
        The run's directory, configuration, summary and trained team.

    Raises:
        ConfigError: every problem of the configuration at once (a ``config`` or
            ``overrides`` of the wrong type included), or a run directory that holds another
            run (nothing is written then).

    Example (one stage of the demo's team of tiny models, in about 10 s on a CPU)::

        >>> from rich.console import Console
        >>> from trainers import train
        >>> result = train(
        ...     run_dir="runs/python-quickstart",
        ...     sft={"steps": 20},
        ...     schedule={"stages": 1, "problems_per_batch": 4, "group_size": 2},
        ...     eval={"problems": 8, "k": 2, "train_distribution": False},
        ...     loggers=[], plot=False, progress=False,
        ...     console=Console(quiet=True),
        ... )
        >>> sorted(result.team), result.summary["stages"]
        (['step1', 'step2', 'step3'], 1)
    """
    _check_arguments(config, overrides)
    # the keywords as key paths and values, after the strings (never printed and parsed again)
    merged: list[Override] = [*overrides, *keyword_overrides(settings)]
    if isinstance(config, TrainConfig):
        built = build_config(
            TrainConfig, to_dict(config), merged, what="training config", check=learner_id_errors
        )
        errors = learner_errors(built)
        if errors:
            raise ConfigError("training config", errors)
    else:
        built = load_train_config(config, merged)
    recipe = TrainingRecipe(built, console=console, callbacks=hooks, loggers=metric_loggers)
    try:
        summary = recipe.run(resume=resume, overwrite=overwrite)
    finally:  # the engines the run started stop; the trained team stays
        recipe.close()
    return RunResult(Path(built.run_dir), built, summary, dict(recipe.policies))


def _check_arguments(config: Any, overrides: Any) -> None:
    """Refuses a ``config`` or ``overrides`` of a type :func:`train` cannot read, both at once,
    before anything is built or written."""
    errors = []
    if not isinstance(config, TrainConfig | str | Path | Mapping | None):
        errors.append(
            "config: expected a TrainConfig, the path of a config file, a mapping of settings "
            f"or None, got {type(config).__name__}"
        )
    if isinstance(overrides, str | bytes):
        errors.append(
            f"overrides: expected a list of 'KEY=VALUE' strings, got the string {overrides!r}: "
            f"write overrides=[{overrides!r}]"
        )
    elif not isinstance(overrides, Sequence) or not all(isinstance(o, str) for o in overrides):
        errors.append(f"overrides: expected a list of 'KEY=VALUE' strings, got {overrides!r}"[:300])
    if errors:
        raise ConfigError("train()", errors)
