"""A training configuration from a file and ``--set`` overrides, checked whole: its fields
(:func:`trainers.config.read_train_config`) and its learner, against the learner registry
(:func:`trainers.learners.registry.learner_errors`), every problem at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamtr_core.config import Override
from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig, read_train_config
from trainers.learners.registry import learner_errors, learner_id_errors

__all__ = ["config_from_overrides", "load_train_config"]


def load_train_config(
    path: str | Path | Mapping[str, Any] | None = None, overrides: Sequence[Override] = ()
) -> TrainConfig:
    """The configuration of ``teamtr train [--config FILE] [--set KEY=VALUE ...]`` (how a file
    and overrides merge: :func:`trainers.config.read_train_config`), its learner checked.

    Raises:
        ConfigError: naming the file, listing every malformed override and every problem of the
            configuration at once: an unregistered ``schedule.learner`` with the others, and the
            learner's own check of a configuration that builds.
    """
    config = read_train_config(path, overrides, check=learner_id_errors)
    errors = learner_errors(config)  # the learner's own check of a configuration that builds
    if errors:
        named = path is not None and not isinstance(path, Mapping)
        what = f"training config {str(path)!r}" if named else "training config"
        raise ConfigError(what, errors)
    return config


def config_from_overrides(overrides: Sequence[str]) -> TrainConfig:
    """The default configuration with ``--set KEY=VALUE`` overrides merged into it (see
    :func:`load_train_config`, which this is without a file)."""
    return load_train_config(None, overrides)
