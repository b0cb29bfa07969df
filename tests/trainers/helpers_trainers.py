"""Trainer test helpers: small exact teams (tabular policies on a fixed arithmetic problem) and
the small tiny-model run configuration (:data:`SMALL`, :func:`small`) that whole-run tests share."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers_crash import CrashAfter as CrashAfter  # re-exported: the trainer tests import it here
from helpers_crash import SimulatedCrash as SimulatedCrash

import teamtr_env
from adapters.tabular import TabularPolicy
from tasks import Problem
from teamtr_core.config import from_dict
from trainers.config import TrainConfig
from trainers.learners.callbacks import Callback
from trainers.optim.records import UpdateRecord
from trainers.optim.result import UpdateResult

MESSAGES = ["Answer: 1", "Answer: 2", "Answer: 3"]
PROBLEMS = [Problem(id="one", data={"expression": "0 + 1"}, answer=1)]


def env_fn(agents: tuple[str, ...] = ("a", "b")) -> Any:
    return teamtr_env.make("teamtr/Arith-v0", agents=list(agents), problems=PROBLEMS)


def tabular_team(agents: tuple[str, ...] = ("a", "b"), seed: int = 0) -> dict[str, TabularPolicy]:
    return {
        name: TabularPolicy(
            ["any"], MESSAGES, featurize=lambda c: "any", init="random", seed=seed + i
        )
        for i, name in enumerate(agents)
    }


def config(**overrides: Any) -> TrainConfig:
    data: dict[str, Any] = {
        "sampling": {"temperature": 1.0},
        "sft": None,
        "diagnostics": True,
        "progress": False,
        "schedule": {"stages": 2, "problems_per_batch": 4, "group_size": 4},
        "optim": {"lr": 0.05, "epochs": 2},
        "trust_region": {"delta": 0.05},
        "eval": {"problems": 4, "k": 2},
    }
    return from_dict(TrainConfig, with_overrides(data, overrides))


def with_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``section__field=value`` sets ``data[section][field]``; a plain key sets ``data[key]``."""
    for key, value in overrides.items():
        section, _, field = key.partition("__")
        if field:
            data.setdefault(section, {})[field] = value
        else:
            data[section] = value
    return data


SMALL: dict[str, Any] = {
    # The old demo's one-digit sums: tiny contexts, and a test split of exactly 8 distinct sums.
    "task": "teamtr/Arith-v0",
    "task_options": {"digits": 1, "system_prompts": {"solver": "", "critic": "", "aggregator": ""}},
    "sampling": {"max_new_tokens": 6},
    "sft": {"problems": 8, "steps": 2, "batch_size": 8},
    "schedule": {"stages": 2, "problems_per_batch": 2, "group_size": 2},
    "eval": {"problems": 4, "k": 2},
    "progress": False,
    # No TensorBoard files or plot where a test does not read them (the plot took 2.7 s of a
    # 4 s run before it lost its constrained layout; tests/trainers/conftest.py's trained run
    # writes both).
    "loggers": [],
    "plot": False,
}


def small(run_dir: Path, **extra: Any) -> TrainConfig:
    """:data:`SMALL` in ``run_dir`` with ``section__field=value`` overrides. Each run builds its
    tiny model in its own (new, empty) run directory: 0.02 s once torch is imported."""
    data = with_overrides(json.loads(json.dumps(SMALL)), extra)
    return from_dict(TrainConfig, {**data, "run_dir": str(run_dir)})


class Recorder(Callback):
    """A callback that records what it is called with, and stops the run after stage
    ``stop_at``."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.updates: list[str] = []
        self.stages: list[int] = []
        self.evals: list[tuple[str, int]] = []
        self.stop_at = stop_at

    def on_update(self, record: Mapping[str, Any]) -> None:
        self.updates.append(record.agent)

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> bool | None:
        self.stages.append(stage)
        assert "stage/reward_mean" in metrics
        return stage == self.stop_at

    def on_eval(self, prefix: str, stage: int, metrics: Mapping[str, float]) -> bool | None:
        self.evals.append((prefix, stage))
        return None


class ListLogger:
    """A metrics logger that keeps the steps it was given."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.closed = False

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self.steps.append(step)

    def close(self) -> None:
        self.closed = True


@dataclass
class TrainedRun:
    """A finished :data:`SMALL` run (TeamTR, 2 stages, validation after each, TensorBoard and the
    plot on) that many tests read: its config, summary, printed output, and what a
    :class:`Recorder` callback and a :class:`ListLogger` saw."""

    config: TrainConfig
    summary: dict[str, Any]
    output: str
    recorder: Recorder = field(default_factory=Recorder)
    logger: ListLogger = field(default_factory=ListLogger)

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run_dir)

    def same_config(self, run_dir: Path, **extra: Any) -> TrainConfig:
        """This run's config in another directory (with overrides): the same results, without
        the TensorBoard files and the plot (1.7 s of a 4 s run; they change no number)."""
        return small(run_dir, **{**TRAINED_RUN_OVERRIDES, "loggers": [], "plot": False, **extra})


TRAINED_RUN_OVERRIDES: dict[str, Any] = {
    "eval__every": 1,
    "loggers": ["tensorboard"],
    "plot": True,
}


def trained_run(run_dir: Path) -> TrainedRun:
    """Trains :class:`TrainedRun`'s run in ``run_dir`` (a piped console of width 200)."""
    from rich.console import Console

    from trainers.run.recipe import run_training

    out = io.StringIO()
    config = small(run_dir, **TRAINED_RUN_OVERRIDES)
    recorder, logger = Recorder(), ListLogger()
    summary = run_training(
        config,
        console=Console(file=out, width=200),
        callbacks=[recorder],
        loggers=[logger],
    )
    return TrainedRun(config, summary, out.getvalue(), recorder, logger)


def make_record(**overrides: Any) -> UpdateRecord:
    """An update record with plausible values, ``overrides`` set (the update's own fields go to
    its embedded :class:`~trainers.optim.result.UpdateResult`, the rest to the record)."""
    values: dict[str, Any] = dict(
        stage=0, index=1, agent="critic", accepted=True, reason="ok", kl_tok=0.01,
        kl_raw=0.02, in_region=True, out_of_region_raw=False, backtracks=1, step_scale=0.5,
        beta=0.1, delta=0.05, l_seq=0.3, ratio_clip_frac=0.0, adv_clip_frac=0.0, messages=8,
        tokens=40, ref_kl=math.nan, groups=2, episodes=8, update_s=0.0, monitor_s=0.0,
    )  # fmt: skip
    values.update(overrides)
    result_fields = {f.name for f in dataclasses.fields(UpdateResult)}
    result = UpdateResult(**{k: v for k, v in values.items() if k in result_fields})
    return UpdateRecord(
        result=result, **{k: v for k, v in values.items() if k not in result_fields}
    )


class BuiltTrainers:
    """Records every TeamTrainer the runs of a test build (to reach their agents' actors):
    ``monkeypatch`` replaces the recipe's TeamTrainer with a recording subclass."""

    def __init__(self, monkeypatch: Any) -> None:
        import trainers.run.recipe as recipe_module
        from trainers.learners.team_trainer import TeamTrainer

        self.trainers: list[TeamTrainer] = []
        built = self.trainers

        class Recording(TeamTrainer):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                built.append(self)

        monkeypatch.setattr(recipe_module, "TeamTrainer", Recording)

    def shut_down(self) -> None:
        """Stops every agent actor of every run recorded."""
        from trainers.placement.agents import is_remote

        for trainer in self.trainers:
            for slot in trainer.slots.values():
                if is_remote(slot):
                    slot.shutdown()
