"""A trained team outside its run: the run's policies with one checkpoint's weights.

``teamtr eval --run-dir RUN_DIR [--checkpoint latest|best|stage_N]`` evaluates it without
exporting anything (docs/trainers.md, "Using the trained team").

A run directory holds its ``config.yaml`` (the configuration it trained with) and
``checkpoints/``: ``stage_XXXX.pt`` files (each trainable agent's weights under
``trainer.slots.<agent>.policy``, beside the optimiser and the run state), ``latest`` (the
newest one's name) and, with ``eval.select: best_validation``, ``best.pt`` (the best validation
stage's weights, agent by agent). Nothing is written to the run directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import teamtr_env
from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams
from trainers import rundir
from trainers.config import TrainConfig, load_train_config
from trainers.team_eval import agent_sampling, build_policies

CHECKPOINTS = ("latest", "best", "stage_N")
"""What ``--checkpoint`` names: the newest intact stage, the best validation stage's team, or
stage N (``stage_3``, ``stage_0003`` or ``3``)."""

_STAGE = re.compile(r"^(?:stage_)?(\d+)$")


@dataclass(frozen=True)
class CheckpointWeights:
    """One checkpoint's trained weights: ``weights`` maps each trainable agent to its policy's
    state dict; ``stage`` is the stage it was saved after (``None`` for ``best.pt``, which
    does not record it)."""

    path: Path
    stage: int | None
    weights: dict[str, Mapping[str, Any]]


@dataclass(frozen=True)
class RunTeam:
    """A run's team with a checkpoint's weights: its configuration, every agent's policy and
    sampling settings, and where the weights came from."""

    config: TrainConfig
    policies: dict[str, Any]
    sampling: dict[str, SamplingParams]
    checkpoint: CheckpointWeights


def checkpoint_weights(run_dir: str | Path, checkpoint: str = "latest") -> CheckpointWeights:
    """The trained weights of ``run_dir``'s checkpoint ``checkpoint`` (see :data:`CHECKPOINTS`).

    ``latest`` is the newest intact stage file (an unreadable newer one is skipped, as
    ``--resume`` does); a named stage or ``best`` must itself be intact.

    Raises:
        ConfigError: no such run, checkpoint or stage (the stages that exist are listed), or a
            file that cannot be read or is not a teamtr checkpoint.
    """
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        raise ConfigError(
            "--run-dir", [f"{run_dir} has no checkpoints/ folder: is it a teamtr train run?"]
        )
    if checkpoint == "latest":
        found = rundir.load(folder)
        if found is None:
            raise ConfigError("--checkpoint", [f"{folder} holds no stage checkpoint"])
        return _from_stage_file(found.path, found.state)
    if checkpoint == "best":
        path = folder / "best.pt"
        if not path.is_file():
            raise ConfigError(
                "--checkpoint",
                [f"{folder} has no best.pt (it is written only with eval.select: best_validation)"],
            )
        try:
            state = rundir.torch_load_plain(path)
        except Exception as exc:
            raise ConfigError(
                "--checkpoint", [f"{path} cannot be read ({type(exc).__name__}: {exc})"]
            ) from exc
        if not isinstance(state, dict) or not all(isinstance(v, dict) for v in state.values()):
            raise ConfigError("--checkpoint", [f"{path} is not a teamtr best-team file"])
        return CheckpointWeights(path, None, state)
    match = _STAGE.match(checkpoint)
    if match is None:
        raise ConfigError("--checkpoint", [f"expected latest, best or stage_N, got {checkpoint!r}"])
    path = rundir.stage_path(folder, int(match.group(1)))
    if not path.is_file():
        kept = ", ".join(rundir.stage_names(folder)) or "no stage files"
        raise ConfigError("--checkpoint", [f"{path.name} is not in {folder} (it keeps: {kept})"])
    try:
        state = rundir.read_checkpoint(path)
    except ValueError as exc:
        raise ConfigError("--checkpoint", [f"{exc} (in {folder})"]) from exc
    return _from_stage_file(path, state)


def _from_stage_file(path: Path, state: Any) -> CheckpointWeights:
    try:
        slots = state["trainer"]["slots"]
        weights = {agent: slot["policy"] for agent, slot in slots.items()}
        stage = int(state["trainer"]["stage"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError("--checkpoint", [f"{path} is not a teamtr checkpoint"]) from exc
    return CheckpointWeights(path, stage, weights)


def run_config(run_dir: str | Path) -> TrainConfig:
    """The configuration ``run_dir`` trained with (its ``config.yaml``, ``run_dir`` set to where
    it is now).

    Raises:
        ConfigError: no ``config.yaml`` there, or one that no longer loads.
    """
    config_file = Path(run_dir) / "config.yaml"
    if not config_file.is_file():
        raise ConfigError(
            "--run-dir", [f"{run_dir} has no config.yaml: is it a teamtr train run directory?"]
        )
    return load_train_config(config_file, [f"run_dir={run_dir}"])


def load_run_team(run_dir: str | Path, checkpoint: str = "latest") -> RunTeam:
    """``run_dir``'s team as it trained (its ``config.yaml``) with ``checkpoint``'s weights.

    The team is built as the run built it (the tiny model of ``models/tiny``, or the team
    config's models and adapters), on this process: a run trained with learner actors
    (``trainer.backend: ray``) loads without Ray. Rollouts use the run's ``rollout.engine``.

    Raises:
        ConfigError: no ``config.yaml``, a bad checkpoint (:func:`checkpoint_weights`), or
            weights for agents the configuration does not have.
    """
    run_dir = Path(run_dir)
    config = run_config(run_dir)
    found = checkpoint_weights(run_dir, checkpoint)
    env = teamtr_env.make(config.task, **config.task_options)
    policies = build_policies(config, env, run_dir)
    unknown = sorted(set(found.weights) - set(policies))
    if unknown:
        raise ConfigError(
            "--checkpoint",
            [
                f"{found.path.name} has weights for {unknown}, which the run's config has no agent for"
            ],
        )
    for agent, state in found.weights.items():
        policies[agent].load_state_dict(state)
    return RunTeam(config, policies, agent_sampling(config, list(policies)), found)
