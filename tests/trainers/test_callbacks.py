"""Callbacks (updates, stages, evaluations, early stopping) and the optional wandb/MLflow loggers."""

from __future__ import annotations

import importlib.machinery
import io
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers_trainers import Recorder, TrainedRun, small
from rich.console import Console

from teamtr_core.errors import ConfigError
from trainers.learners.callbacks import Callback, EarlyStopping, load_callbacks
from trainers.run.recipe import run_training

QUIET = Console(file=io.StringIO())


def test_callbacks_see_every_update_stage_and_evaluation(trained: TrainedRun) -> None:
    recorder, extra = trained.recorder, trained.logger  # passed to run_training by the fixture
    assert recorder.updates == ["solver", "critic", "aggregator"] * 2
    assert recorder.stages == [1, 2]
    assert recorder.evals == [("eval", 0), ("val", 1), ("val", 2), ("eval", 2)]
    assert trained.summary["stopped_early"] is None
    assert extra.steps == [0, 1, 2, 2] and extra.closed


def test_a_callback_can_stop_the_run_and_the_summary_says_so(tmp_path: Path) -> None:
    cfg = small(tmp_path / "run", schedule__stages=3, sft=None, eval__train_distribution=False)
    out = io.StringIO()
    summary = run_training(cfg, console=Console(file=out, width=200), callbacks=[Recorder(1)])
    assert summary["stages"] == 1 and summary["stopped_early"] == {"stage": 1, "by": "Recorder"}
    assert summary["after"]  # evaluated as usual
    assert "Recorder stopped the run after stage 1 of 3" in out.getvalue()


def test_early_stopping_rule_and_config() -> None:
    stop = EarlyStopping("val/avg@4", patience=2, min_delta=0.01)
    seen = [stop.on_eval("val", s, {"val/avg@4": v}) for s, v in enumerate([0.1, 0.2, 0.205, 0.19])]
    assert seen == [False, False, False, True]  # 0.205 is not > 0.2 + 0.01
    assert stop.on_eval("eval", 9, {"val/avg@4": 0.0}) is None  # only validation counts
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping("val/avg@4", patience=0)
    with pytest.raises(Exception, match="early_stop_patience needs eval.every"):
        small(Path("unused"), eval__early_stop_patience=2)


def test_early_stopping_from_the_config_stops_a_flat_run(tmp_path: Path) -> None:
    # A fresh tiny model scores the same on validation stage after stage: patience 1 stops it.
    cfg = small(
        tmp_path / "run",
        sft=None,
        eval__train_distribution=False,
        schedule__stages=4,
        eval__every=1,
        eval__early_stop_patience=1,
    )
    summary = run_training(cfg, console=QUIET)
    assert summary["stopped_early"] == {"stage": 2, "by": "EarlyStopping('val/avg@2', patience=1)"}


def test_callbacks_by_import_path_report_every_problem() -> None:
    (made,) = load_callbacks(["trainers.learners.callbacks:Callback"])
    assert type(made) is Callback
    with pytest.raises(ConfigError) as excinfo:
        load_callbacks(["nocolon", "no_such_module_xyz:Thing", "trainers.run.logger:NullLogger"])
    text = "\n".join(excinfo.value.errors)
    assert "'nocolon' is not 'module:attribute'" in text
    assert "no_such_module_xyz:Thing' failed: ModuleNotFoundError" in text
    assert "gave NullLogger, not a Callback" in text


def fake_module(name: str, **attributes: Any) -> types.ModuleType:
    """A stand-in module with a spec: libraries imported later (accelerate, via transformers)
    probe ``importlib.util.find_spec(name)``, which fails on a module without one."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attributes)
    return module


def test_wandb_and_mlflow_loggers_when_installed_and_a_clear_error_when_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Any]] = []

    class FakeRun:
        def log(self, metrics: dict, step: int) -> None:
            calls.append(("wandb.log", step))

        def finish(self) -> None:
            calls.append(("wandb.finish", None))

    wandb = fake_module("wandb", init=lambda **kw: calls.append(("wandb.init", kw)) or FakeRun())
    mlflow = fake_module(
        "mlflow",
        set_experiment=lambda name: calls.append(("mlflow.experiment", name)),
        start_run=lambda **kw: calls.append(("mlflow.start", kw)),
        log_params=lambda params: calls.append(("mlflow.params", len(params))),
        log_metrics=lambda metrics, step: calls.append(("mlflow.log", step)),
        end_run=lambda: calls.append(("mlflow.end", None)),
    )
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    cfg = small(
        tmp_path / "run",
        loggers=["wandb", "mlflow"],
        schedule__stages=1,
        sft=None,
        eval__train_distribution=False,
        logger_options={
            "wandb": {"project": "p", "mode": "offline"},
            "mlflow": {"experiment": "e"},
        },
    )
    run_training(cfg, console=QUIET)
    names = [name for name, _ in calls]
    init = dict(calls)["wandb.init"]
    assert init["project"] == "p" and init["config"]["seed"] == 0 and init["name"] == "run"
    # the evaluation before training (step 0), the stage, the final evaluation
    assert names.count("wandb.log") == 3 and names.count("mlflow.log") == 3
    assert ("mlflow.experiment", "e") in calls and names[-2:] == ["wandb.finish", "mlflow.end"]
    assert not (tmp_path / "run" / "tb").exists()  # tensorboard was not asked for
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    with pytest.raises(ConfigError, match="pip install wandb"):
        run_training(small(tmp_path / "other", loggers=["wandb"]), console=QUIET)
