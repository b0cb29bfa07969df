"""Training configuration: typed, frozen dataclasses are the single source of truth (the bottom
floor of ``trainers``: it imports no other room).

The JSON Schema that validates YAML/JSON config files is generated from these classes
(``teamtr_core.config_schema.json_schema(TrainConfig)``); every problem in a file is reported at
once. ``teamtr train --config FILE --set key=value`` loads one
(:func:`trainers.run.config_file.load_train_config`, which also checks the learner against the
registry); ``teamtr train`` alone runs the defaults (the CPU demo).

* :mod:`~trainers.config.sections`: ``schedule``, ``trust_region``, ``optim``, ``runner``,
  ``rollout``, ``eval``, ``diagnostics``;
* :mod:`~trainers.config.gang`: :class:`Gang` (how one trainable agent is placed);
* :mod:`~trainers.config.sft`: ``sft`` (the behaviour-cloning warm start);
* :mod:`~trainers.config.task_schedule`: ``task_schedule`` (task options by stage);
* :mod:`~trainers.config.train`: :class:`TrainConfig` and :func:`read_train_config`.
"""

from trainers.config.gang import Gang
from trainers.config.sections import (
    AdvantageEstimator,
    AdvantageStd,
    DiagnosticsConfig,
    EvalConfig,
    OptimConfig,
    RewardConfig,
    RolloutConfig,
    RunnerConfig,
    ScheduleConfig,
    TrustRegionConfig,
)
from trainers.config.sft import SFTConfig
from trainers.config.task_schedule import TaskStage
from trainers.config.train import (
    DEMO_TASK,
    DEMO_TASK_OPTIONS,
    TrainConfig,
    read_team_file,
    read_train_config,
)

__all__ = [
    "DEMO_TASK",
    "DEMO_TASK_OPTIONS",
    "AdvantageEstimator",
    "AdvantageStd",
    "DiagnosticsConfig",
    "EvalConfig",
    "Gang",
    "OptimConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunnerConfig",
    "SFTConfig",
    "ScheduleConfig",
    "TaskStage",
    "TrainConfig",
    "TrustRegionConfig",
    "read_team_file",
    "read_train_config",
]
