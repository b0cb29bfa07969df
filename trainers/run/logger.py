"""Metrics logging: one interface, JSONL and TensorBoard backends (wandb and MLflow when they are
installed), and learning-curve plots.

Keys are namespaced (``stage/reward_mean``, ``agent/solver/kl_tok``, ``eval/pass@4``) and checked by
:func:`check_key` in every backend, so a typo fails on the first ``log`` call, not in a plot later.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from teamtr_core.config import flat_items
from teamtr_core.errors import ConfigError

_log = logging.getLogger(__name__)
_KEY_RE = re.compile(r"[A-Za-z0-9_.@^-]+(?:/[A-Za-z0-9_.@^-]+){1,2}")
Metrics = Mapping[str, float | int | bool]


class MetricsLogger(Protocol):
    """Anything that records scalar metrics at a step."""

    def log(self, metrics: Metrics, step: int) -> None: ...

    def close(self) -> None: ...


def check_key(key: str) -> None:
    """Raises ValueError unless ``key`` is ``a/b`` or ``a/b/c`` with ``[A-Za-z0-9_.@^-]`` segments."""
    if not isinstance(key, str) or _KEY_RE.fullmatch(key) is None:
        raise ValueError(
            f"bad metric key {key!r}: expected 'a/b' or 'a/b/c' with segments of "
            "[A-Za-z0-9_.@^-], e.g. 'stage/reward_mean', 'agent/solver/kl_tok', 'eval/pass@4'"
        )


def _clean(metrics: Metrics) -> dict[str, float | int | bool]:
    """Checks keys and normalises values to plain bool/int/float (numpy scalars included)."""
    out: dict[str, float | int | bool] = {}
    for key, value in metrics.items():
        check_key(key)
        if isinstance(value, bool):
            out[key] = value
        elif isinstance(value, numbers.Integral):
            out[key] = int(value)
        elif isinstance(value, numbers.Real):
            out[key] = float(value)
        else:
            raise TypeError(f"metric {key!r}: expected float, int or bool, not {type(value)}")
    return out


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Reads every record of a :class:`JsonlLogger` file; a torn last line (crash) is dropped."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    records: list[dict[str, Any]] = []
    for i, line in enumerate(lines, start=1):
        try:
            if line.strip():
                records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i == len(lines):  # no trailing newline: the write was interrupted
                _log.warning("%s: dropping torn last line %d", path, i)
                break
            raise ValueError(f"{path}:{i}: not valid JSON ({err})") from err
    return records


class JsonlLogger:
    """Appends one JSON object per ``log`` call: ``{"step", "time", **metrics}``, flushed per line.

    Non-finite floats are written as null and their keys listed under ``"_nonfinite"``.

    Args:
        path: The ``.jsonl`` file; parent directories are created.
        resume_step: None starts fresh (overwrites). An int resumes: existing records with
            ``step > resume_step`` are dropped (they were logged after the checkpoint) and new ones append.
    """

    def __init__(self, path: str | os.PathLike[str], *, resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.exists():
            kept = [r for r in read_jsonl(self.path) if r["step"] <= resume_step]
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
            os.replace(tmp, self.path)  # atomic: a crash here leaves the old or the new file
        mode = "w" if resume_step is None else "a"
        self._file = open(self.path, mode, encoding="utf-8")  # noqa: SIM115 (closed in close())

    def log(self, metrics: Metrics, step: int) -> None:
        """Writes one record and flushes it to the OS."""
        clean = _clean(metrics)
        nonfinite = [k for k, v in clean.items() if not math.isfinite(v)]
        record: dict[str, Any] = {"step": int(step), "time": time.time(), **clean}
        record.update(dict.fromkeys(nonfinite))  # JSON has no NaN/inf: null, and say which
        if nonfinite:
            record["_nonfinite"] = nonfinite
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Closes the file; safe to call twice."""
        self._file.close()


class TensorBoardLogger:
    """Writes every metric as a TensorBoard scalar; bools as 0/1, non-finite values skipped.

    Args:
        log_dir: Directory for the event files.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        from torch.utils.tensorboard import SummaryWriter  # torch is heavy; import on use

        self._writer = SummaryWriter(log_dir=str(log_dir))
        self._warned: set[str] = set()

    def log(self, metrics: Metrics, step: int) -> None:
        """Adds one scalar per key at ``step``."""
        for key, value in _clean(metrics).items():
            if not math.isfinite(value):
                if key not in self._warned:  # warn once: a diverged run would flood the log
                    self._warned.add(key)
                    _log.warning("metric %r is %r at step %d; not written", key, value, step)
                continue
            self._writer.add_scalar(key, float(value), global_step=int(step))

    def close(self) -> None:
        """Flushes pending events and closes the writer."""
        self._writer.flush()
        self._writer.close()


class WandbLogger:
    """Logs to Weights & Biases (``pip install wandb``; not a dependency of teamtr).

    Args:
        run_dir: the run directory (wandb's ``dir``; the run is named after it).
        config: the run's configuration (plain data), shown by wandb.
        options: passed to ``wandb.init`` (e.g. ``project``, ``entity``, ``mode: offline``).
    """

    def __init__(
        self, run_dir: str | os.PathLike[str], config: Mapping[str, Any], options: Mapping[str, Any]
    ) -> None:
        wandb = _optional("wandb")
        kwargs = {"dir": str(run_dir), "name": os.path.basename(str(run_dir)), **options}
        self._run = wandb.init(config=dict(config), **kwargs)

    def log(self, metrics: Metrics, step: int) -> None:
        """Logs the finite metrics at ``step``."""
        finite = {k: v for k, v in _clean(metrics).items() if math.isfinite(v)}
        self._run.log(finite, step=int(step))

    def close(self) -> None:
        """Finishes the wandb run."""
        self._run.finish()


class MLflowLogger:
    """Logs to MLflow (``pip install mlflow``; not a dependency of teamtr).

    Args:
        run_dir: the run directory (the MLflow run is named after it).
        config: the run's configuration, logged as flattened parameters.
        options: ``tracking_uri`` and ``experiment`` (optional), the rest to ``start_run``.
    """

    def __init__(
        self, run_dir: str | os.PathLike[str], config: Mapping[str, Any], options: Mapping[str, Any]
    ) -> None:
        mlflow = self._mlflow = _optional("mlflow")
        options = dict(options)
        if "tracking_uri" in options:
            mlflow.set_tracking_uri(options.pop("tracking_uri"))
        if "experiment" in options:
            mlflow.set_experiment(options.pop("experiment"))
        mlflow.start_run(run_name=os.path.basename(str(run_dir)), **options)
        # flattened; a value is cut to MLflow's 250-character parameter limit
        mlflow.log_params({k: json.dumps(v, default=str)[:250] for k, v in flat_items(config)})

    def log(self, metrics: Metrics, step: int) -> None:
        """Logs the finite metrics at ``step`` (MLflow keys allow ``/``)."""
        finite = {k: float(v) for k, v in _clean(metrics).items() if math.isfinite(v)}
        self._mlflow.log_metrics(finite, step=int(step))

    def close(self) -> None:
        """Ends the MLflow run."""
        self._mlflow.end_run()


def _optional(name: str) -> Any:
    """Imports an optional logging backend, or says how to install it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            "loggers", [f"the {name} logger needs the {name} package: pip install {name}"]
        ) from exc


def missing_loggers(names: Sequence[str]) -> list[str]:
    """A line for each optional logger in ``names`` whose package is not installed (checked
    before a run writes anything)."""
    missing = []
    for name in names:
        if name in ("wandb", "mlflow"):
            try:
                _optional(name)
            except ConfigError as exc:
                missing += exc.errors
    return missing


def make_loggers(
    names: Sequence[str],
    run_dir: str | os.PathLike[str],
    config: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Any]],
) -> list[MetricsLogger]:
    """The loggers named in a training config (``tensorboard``, ``wandb``, ``mlflow``), each
    with its ``options``; the JSONL log is always written and is not listed here."""
    out: list[MetricsLogger] = []
    for name in names:
        if name == "tensorboard":
            out.append(TensorBoardLogger(os.path.join(str(run_dir), "tb")))
        elif name == "wandb":
            out.append(WandbLogger(run_dir, config, options.get("wandb", {})))
        elif name == "mlflow":
            out.append(MLflowLogger(run_dir, config, options.get("mlflow", {})))
        else:  # the config's choices check names the valid ones first
            raise ConfigError("loggers", [f"unknown logger {name!r}"])
    return out


class MultiLogger:
    """Fans every call out to several loggers, in order."""

    def __init__(self, *loggers: MetricsLogger) -> None:
        self.loggers = loggers

    def log(self, metrics: Metrics, step: int) -> None:
        """Logs to every backend."""
        for logger in self.loggers:
            logger.log(metrics, step)

    def close(self) -> None:
        """Closes every backend."""
        for logger in self.loggers:
            logger.close()


class NullLogger:
    """Discards metrics (keys are still checked, so tests with it catch typos)."""

    def log(self, metrics: Metrics, step: int) -> None:
        """Checks keys and values, then does nothing."""
        _clean(metrics)

    def close(self) -> None:
        """Does nothing."""


def metric_series(path: str | os.PathLike[str]) -> dict[str, list[tuple[int, float]]]:
    """Every numeric metric of a :class:`JsonlLogger` file as ``key -> [(step, value), ...]``,
    sorted by step (``step``, ``time`` and null values left out)."""
    series: dict[str, list[tuple[int, float]]] = {}
    for record in read_jsonl(path):
        for key, value in record.items():
            if "/" in key and isinstance(value, int | float):  # skips step, time, nulls
                series.setdefault(key, []).append((int(record["step"]), float(value)))
    return {key: sorted(points) for key, points in series.items()}


def plot_learning_curves(
    jsonl_path: str | os.PathLike[str],
    png_path: str | os.PathLike[str],
    *,
    keys: Sequence[str] | None = None,
    title: str = "",
) -> Path:
    """Plots metric vs step from a JSONL log, one subplot per key, and saves a PNG (dpi 100).

    Args:
        jsonl_path: A file written by :class:`JsonlLogger`.
        png_path: Where to save; parent directories are created.
        keys: Keys to plot; default every ``stage/``, ``eval/``, ``train_eval/`` or ``val/`` key
            with a numeric value, but the per-agent evaluation shares ``eval/<agent>/clipped_ratio``
            (``stage/clipped_ratio`` is plotted).
        title: Figure title.

    Returns:
        ``png_path`` as a Path. With nothing to plot the figure says "no data".
    """
    from matplotlib.figure import Figure  # no pyplot: Agg canvas, no display, no global state

    series = metric_series(jsonl_path)
    keys = (
        [
            k
            for k in series
            if k.startswith(("stage/", "eval/", "val/", "train_eval/"))
            and not (k.count("/") == 2 and k.endswith("/clipped_ratio"))
        ]
        if keys is None
        else keys
    )
    for key in keys:
        check_key(key)
    ncols = max(1, min(3, len(keys)))
    nrows = max(1, math.ceil(len(keys) / ncols))
    height = 3.2 * nrows
    # A fixed grid, not layout="constrained": measuring every label's extent to lay out a
    # 27-panel figure took 2.7 s of a 4 s test run, the fixed margins 0.1 s.
    fig = Figure(figsize=(4.5 * ncols, height))
    fig.subplots_adjust(
        left=0.1 if ncols == 1 else 0.06,
        right=0.98,
        bottom=0.5 / height,
        top=1 - 0.75 / height,
        hspace=0.55,
        wspace=0.35,
    )
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(keys) :]:
        ax.set_axis_off()
    for ax, key in zip(axes, keys or [""]):
        points = series.get(key, [])
        if points:
            ax.plot(*zip(*points), marker="." if len(points) < 50 else "")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set(title=key, xlabel="step")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    out = Path(png_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, format="png")  # Figure() skips pyplot: nothing global to close
    return out
