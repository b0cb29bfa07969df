"""The whole training configuration (:class:`TrainConfig`) and how a file and ``--set``
overrides become one (:func:`read_train_config`; the learner-checked loader is
:func:`trainers.run.config_file.load_train_config`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from adapters.team import TeamConfig, sampling_errors
from adapters.tiny import TinyModelSpec
from teamtr_core.config import Override, inherit
from teamtr_core.errors import ConfigError
from teamtr_core.policy import SamplingParams
from teamtr_core.seeds import seed_errors
from trainers.config.sections import (
    _RUN_SAMPLING,
    DiagnosticsConfig,
    EvalConfig,
    LoggerName,
    OptimConfig,
    RewardConfig,
    RolloutConfig,
    RunnerConfig,
    ScheduleConfig,
    TrustRegionConfig,
    _help,
)
from trainers.config.sft import SFTConfig
from trainers.config.task_schedule import TaskStage, schedule_errors, schedule_stage_errors

DEMO_TASK = "teamtr/Pipeline-v0"
DEMO_TASK_OPTIONS: dict[str, Any] = {
    # Chains of three +/-1..5 steps on values 0..9: 363 distinct held-out chains, and a step a
    # 0.55M-parameter character model learns (with copying the rest of the chain) in ~100 s.
    "max_operand": 5,
    "max_value": 9,
    # The cloned expert sometimes leaves out the rest of the chain: a habit only the team reward
    # shows to be wrong (the next agent has nothing to work on), and RL removes.
    "expert_error": "drop_rest",
    # No system prompts: short contexts for a tiny character-level model.
    "system_prompts": {"step1": "", "step2": "", "step3": ""},
}


def _task_errors(value: Any) -> list[str]:
    """The field check of ``task``: a registered id, checked with the rest of the configuration
    (the registry's message, with its suggestions)."""
    if not isinstance(value, str):
        return []
    from teamtr_core.errors import RegistryError
    from teamtr_env.registration import registry

    try:
        registry.spec(value)
    except RegistryError as exc:
        return [str(exc.args[0]) if exc.args else str(exc)]
    return []


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run. ``teamtr train`` with no config runs these defaults: a 3-agent team of
    tiny local models on teamtr/Pipeline-v0 (each agent does one step of a chain and sees only the
    previous message), behaviour-cloned to a weak start, then TeamTR."""

    task: str = field(
        default=DEMO_TASK, metadata={"help": "registered task id", "check": _task_errors}
    )
    task_options: dict[str, Any] = field(
        default_factory=lambda: dict(DEMO_TASK_OPTIONS),
        metadata={
            "help": "options passed to teamtr_env.make (default: the demo's chains of three "
            "+/-1..5 steps on values 0..9, no system prompts)"
        },
    )
    task_schedule: list[TaskStage] = field(
        default_factory=list,
        metadata={
            "help": "task options by stage, for the training problems only: each entry's options "
            "are merged over task_options from its stage on, e.g. a curriculum [{from_stage: 1, "
            "options: {curriculum_level: 0}}, {from_stage: 11, options: {curriculum_level: 1}}]; "
            "evaluation and validation keep task_options",
            "check": schedule_errors,
        },
    )
    team: TeamConfig | None = _help(
        "each agent's policy; null = every agent starts from the tiny model below", None
    )
    tiny_model: TinyModelSpec = field(
        default_factory=TinyModelSpec,
        metadata={"help": "the tiny model built in run_dir/models/tiny when team is null"},
    )
    sampling: SamplingParams = field(
        default_factory=lambda: _RUN_SAMPLING,
        metadata={
            "help": "rollout sampling of every agent (the paper: temperature 0.8, top-p 1, no "
            "top-k); a team config's sampling sections override it key by key",
            "check": sampling_errors,
        },
    )
    sft: SFTConfig | None = field(
        default_factory=SFTConfig,
        metadata={"help": "behaviour cloning from the task's scripted expert first (null = skip)"},
    )
    sft_shared: bool = _help(
        "clone one model on every agent's expert messages and start each agent from a copy "
        "(same architecture required; separate parameters afterwards)",
        True,
    )
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    learner_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "the settings of schedule.learner alone, checked by that learner (a key "
            "another learner takes is refused): teamtr's resample_every, naive_sequential's "
            "importance_weighting, at_grpo's trust_region (`teamtr learners` lists each one's)",
        },
    )
    runner: RunnerConfig = field(
        default_factory=RunnerConfig,
        metadata={"help": "where the run runs: rollouts and each agent's updates (local, or Ray)"},
    )
    rollout: RolloutConfig = field(
        default_factory=RolloutConfig,
        metadata={"help": "what samples the trainable agents' rollouts (hf, or a vLLM engine)"},
    )
    trust_region: TrustRegionConfig = field(default_factory=TrustRegionConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    reward: RewardConfig = field(
        default_factory=RewardConfig,
        metadata={
            "help": "each agent's reward: team x the team reward + local x its local reward "
            "(tasks with local rewards; docs/rewards.md). Default: the team reward alone"
        },
    )
    eval: EvalConfig = field(default_factory=EvalConfig)
    diagnostics: DiagnosticsConfig = field(
        default_factory=DiagnosticsConfig,
        metadata={
            "help": "the paper's diagnostics (off | cheap | full, or a section; "
            "docs/diagnostics.md): cheap costs no rollouts; full samples independent batches "
            "outside the training budget (turn it on in teamtr compare with --set diagnostics=full)"
        },
    )
    callbacks: list[str] = field(
        default_factory=list,
        metadata={
            "help": "callbacks by import path, 'module:attribute' (a trainers.learners.callbacks.Callback "
            "class or factory, called with no arguments)"
        },
    )
    loggers: list[LoggerName] = field(
        default_factory=lambda: ["tensorboard"],
        metadata={
            "help": "where metrics go besides metrics.jsonl: tensorboard, wandb, mlflow (the last "
            "two need their packages installed)"
        },
    )
    plot: bool = _help(
        "draw the learning curves into run_dir/curves.png at the end of the run (about 1 s; "
        "metrics.jsonl holds the same numbers)",
        True,
    )
    logger_options: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={
            "help": "per logger, e.g. {wandb: {project: teamtr, mode: offline}, mlflow: "
            "{experiment: x, tracking_uri: file:runs/mlruns}}"
        },
    )
    seed: int = field(
        default=0, metadata={"help": "everything random derives from it", "check": seed_errors}
    )
    torch_threads: int = _help(
        "CPU threads for torch (0 = torch's default). Tiny models gain little from a second "
        "thread and stall badly when another process holds a core, so the default is 1",
        1,
    )

    def __post_init__(self) -> None:
        if not isinstance(self.diagnostics, DiagnosticsConfig):  # TrainConfig(diagnostics="full")
            section = _diagnostics_section(self.diagnostics)
            object.__setattr__(self, "diagnostics", DiagnosticsConfig(**section))
        errors = []
        if self.torch_threads < 0:
            errors.append(
                f"torch_threads must be >= 0 (0 = torch's default), got {self.torch_threads}"
            )
        if errors:
            raise ValueError("; ".join(errors))

    _renamed_keys: ClassVar[dict[str, str | dict[str, str]]] = {
        "temperature": "sampling.temperature",
        "max_new_tokens": "sampling.max_new_tokens",
        "trainer": {
            "backend": "runner.agents",
            "address": "runner.address",
            "num_cpus": "runner.agent_cpus",
            "num_gpus": "runner.agent_gpus",
            "max_restarts": "runner.max_restarts",
        },
    }

    @staticmethod
    def _prepare_config(data: dict[str, Any]) -> None:
        """A partial ``sampling`` keeps the run's defaults (12 tokens, not the class's 64), and a
        team config's ``sampling`` inherits the keys it leaves out from the run's."""
        if "sampling" in data:
            data["sampling"] = inherit(None, data["sampling"], _RUN_SAMPLING)
        if "diagnostics" in data:
            data["diagnostics"] = _diagnostics_section(data["diagnostics"])
        team = data.get("team")
        if isinstance(team, dict):
            team["sampling"] = inherit(data.get("sampling"), team.get("sampling"), _RUN_SAMPLING)

    run_dir: str = _help("logs, checkpoints, plot and summary go here", "runs/teamtr-demo")
    progress: bool = _help("progress bars", True)


def _diagnostics_section(value: Any) -> Any:
    """``diagnostics: full`` is ``{level: full}``. YAML reads a bare ``off`` as ``false``, and
    ``true``/``false`` were the option's old values (``full``/``off``), so booleans map to those,
    at the top and as ``level``; ``null`` is ``off``."""

    def level(v: Any) -> Any:
        return ("full" if v else "off") if isinstance(v, bool) else (v or "off")

    if isinstance(value, (bool, str)) or value is None:
        return {"level": level(value)}
    if isinstance(value, dict) and isinstance(value.get("level"), bool):
        return {**value, "level": level(value["level"])}
    return value


def read_train_config(
    path: str | Path | Mapping[str, Any] | None = None,
    overrides: Sequence[Override] = (),
    *,
    check: Callable[[Mapping[str, Any]], list[str]] | None = None,
) -> TrainConfig:
    """The configuration of ``teamtr train [--config FILE] [--set KEY=VALUE ...]``, checked field
    by field (the learner id is not: :func:`trainers.run.config_file.load_train_config` checks
    it against the learner registry, through ``check``).

    One rule with or without a file (no file is an empty one): what the file leaves out keeps its
    default, a partial section (``sft: {steps: 100}``) keeps the defaults of its other keys, and a
    file that does not mention ``task_options`` gets the demo's (:data:`DEMO_TASK_OPTIONS`) while
    the task is the demo's (:data:`DEMO_TASK`), none for another task. ``--set`` overrides are
    merged into that: ``--set task_options.max_value=20`` changes one option and keeps the others
    (the demo's ``system_prompts`` included); ``--set task_options={...}`` replaces them all.

    Args:
        path: the YAML or JSON file (``None``: the defaults), or its content as a mapping
            (read as a file would be; a ``team`` file path is relative to the working directory).
        overrides: ``KEY=VALUE`` strings, or key paths with their values
            (:data:`teamtr_core.config.Override`: ``train()``'s keyword settings).
        check: more problems of the merged data (one line each), reported with the fields'.

    Raises:
        ConfigError: naming the file, listing every malformed override and every problem of the
            configuration at once.
    """
    from teamtr_core.config import build_config, override_parts, read_config

    if path is None or isinstance(path, Mapping):
        what, base = "training config", Path(".")
        data = copy.deepcopy(dict(path or {}))
    else:
        what = f"training config {str(path)!r}"
        data, base = read_config(path, what), Path(path).resolve().parent
    if isinstance(data.get("team"), str):
        data["team"] = read_team_file(data["team"], base, what)
    task = data.get("task", DEMO_TASK)
    kept: list[Override] = []
    for override in overrides:
        try:
            keys, value = override_parts(override)
        except ValueError:  # a malformed override: build_config reports it
            kept.append(override)
            continue
        if keys == ["task"]:
            task = value
        if keys == ["team"] and isinstance(value, str):  # --set team=FILE
            data["team"] = read_team_file(value, Path("."), what)
            continue
        kept.append(override)
    overrides = kept
    if "task_options" not in data:
        data["task_options"] = dict(DEMO_TASK_OPTIONS) if task == DEMO_TASK else {}

    def checks(merged: Mapping[str, Any]) -> list[str]:  # across sections, then the caller's
        schedule = merged.get("schedule")
        stages = schedule.get("stages") if isinstance(schedule, Mapping) else None
        errors = schedule_stage_errors(
            merged, ScheduleConfig().stages if stages is None else stages
        )
        return errors + (check(merged) if check is not None else [])

    return build_config(TrainConfig, data, overrides, what=what, check=checks)


def read_team_file(path: str, base: Path, what: str) -> dict[str, Any]:
    """The team config file ``path`` (relative to ``base``: the training config's folder) as a
    ``team`` section: its model paths made relative to its own folder, as ``teamtr eval --team``
    reads it.

    Raises:
        ConfigError: the file is missing or unreadable.
    """
    from teamtr_core.config import read_config

    file = Path(path) if Path(path).is_absolute() else base / path
    if not file.is_file():
        raise ConfigError(
            what, [f"team: no team config file {file} (a relative path is read from {base})"]
        )
    data = read_config(file, f"team config {str(file)!r}")
    folder = file.resolve().parent
    sections = [data.get("default"), *(data.get("agents") or {}).values()]
    for agent in sections:
        if not isinstance(agent, dict):
            continue
        for key in ("path", "adapter_path"):
            value = agent.get(key)
            if isinstance(value, str) and not Path(value).is_absolute():
                agent[key] = str(folder / value)
    return data
