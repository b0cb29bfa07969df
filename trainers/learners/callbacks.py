"""Callbacks: code a training run calls after every update, stage and evaluation.

``run_training(config, callbacks=[...])`` calls each callback's hooks in order; the config's
``callbacks`` list names more by import path (``"mypackage.hooks:MyCallback"``, built with no
arguments), and ``eval.early_stop_patience`` adds :class:`EarlyStopping`. A hook that returns
``True`` from :meth:`Callback.on_stage_end` or :meth:`Callback.on_eval` stops the run after that
stage: the checkpoint is written, the team is evaluated as usual, and ``summary.json`` records the
stage and the callback under ``stopped_early``.

Example::

    class StopWhenSolved(Callback):
        def on_eval(self, prefix, stage, metrics):
            return prefix == "val" and metrics["val/avg@4"] >= 0.95
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence

from teamtr_core.errors import ConfigError
from trainers.optim.records import UpdateRecord


class Callback:
    """Hooks into a training run; every hook is optional (the defaults do nothing)."""

    def __repr__(self) -> str:
        return type(self).__name__

    def on_update(self, record: UpdateRecord) -> None:
        """After each agent update, with its :class:`trainers.optim.records.UpdateRecord`
        (``record.agent``, ``record.accepted``, ``record.kl_tok``, ``record.beta``, ...)."""

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> bool | None:
        """After stage ``stage`` (1-based, the stages done) with its logged metrics (the
        periodic validation's included). Return ``True`` to stop the run."""
        return None

    def on_eval(self, prefix: str, stage: int, metrics: Mapping[str, float]) -> bool | None:
        """After an evaluation: ``prefix`` is ``"eval"`` before (stage 0) and after training,
        ``"val"`` for the periodic validation. Return ``True`` (from a ``"val"`` evaluation) to
        stop the run after this stage."""
        return None


class EarlyStopping(Callback):
    """Stops a run when a validation metric has not improved for ``patience`` evaluations.

    Args:
        metric: the key to watch, e.g. ``"val/avg@4"``.
        patience: evaluations without an improvement of more than ``min_delta`` before stopping.
        min_delta: the smallest change that counts as an improvement.
        mode: ``"max"`` (higher is better) or ``"min"``.
    """

    def __init__(
        self, metric: str, patience: int = 3, min_delta: float = 0.0, mode: str = "max"
    ) -> None:
        if patience < 1 or mode not in ("max", "min") or min_delta < 0:
            raise ValueError("EarlyStopping: need patience >= 1, min_delta >= 0, mode max|min")
        self.metric, self.patience, self.min_delta, self.mode = metric, patience, min_delta, mode
        self.best = -math.inf if mode == "max" else math.inf
        self.waited = 0

    def on_eval(self, prefix: str, stage: int, metrics: Mapping[str, float]) -> bool | None:
        if prefix != "val" or self.metric not in metrics:
            return None
        value = float(metrics[self.metric])
        better = (
            value > self.best + self.min_delta
            if self.mode == "max"
            else (value < self.best - self.min_delta)
        )
        if better:
            self.best, self.waited = value, 0
            return False
        self.waited += 1
        return self.waited >= self.patience

    def __repr__(self) -> str:
        return f"EarlyStopping({self.metric!r}, patience={self.patience})"


def load_callbacks(paths: Sequence[str]) -> list[Callback]:
    """Callbacks named by import path, ``"module:attribute"`` (a class or factory called with no
    arguments).

    Raises:
        ConfigError: every path that is malformed, cannot be imported, or does not give a
            :class:`Callback` (all at once).
    """
    out, errors = [], []
    for path in paths:
        module, sep, attr = path.partition(":")
        if not sep or not module or not attr:
            errors.append(f"callbacks: {path!r} is not 'module:attribute'")
            continue
        try:
            made = getattr(importlib.import_module(module), attr)()
        except Exception as exc:  # an import error or a failing constructor: the user's code
            errors.append(f"callbacks: {path!r} failed: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(made, Callback):
            errors.append(f"callbacks: {path!r} gave {type(made).__name__}, not a Callback")
            continue
        out.append(made)
    if errors:
        raise ConfigError("training config", errors)
    return out


class OnUpdate(Callback):
    """A callback from a function called after each update with its record: what a test or a
    script that watches the team between updates needs (e.g. snapshots of the policies)."""

    def __init__(self, fn: Callable[[UpdateRecord], None]) -> None:
        self.fn = fn

    def on_update(self, record: UpdateRecord) -> None:
        self.fn(record)

    def __repr__(self) -> str:
        return f"OnUpdate({getattr(self.fn, '__name__', 'fn')})"


class CallbackList:
    """Calls every callback's hook in order; a stop request names the callback. The one hook
    mechanism of training: ``TeamTrainer(callbacks=...)`` calls ``on_update`` after every
    update, the recipe ``on_stage_end`` and ``on_eval``."""

    def __init__(self, callbacks: Sequence[Callback] = ()) -> None:
        self.callbacks = list(callbacks)

    def append(self, callback: Callback) -> None:
        """Adds a callback, called after the others."""
        self.callbacks.append(callback)

    def remove(self, callback: Callback) -> None:
        """Removes a callback."""
        self.callbacks.remove(callback)

    def on_update(self, record: UpdateRecord) -> None:
        for callback in self.callbacks:
            callback.on_update(record)

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> str | None:
        """The first callback asking to stop (its name), else ``None``; all are called."""
        stop = None
        for callback in self.callbacks:
            if callback.on_stage_end(stage, metrics) and stop is None:
                stop = repr(callback)
        return stop

    def on_eval(self, prefix: str, stage: int, metrics: Mapping[str, float]) -> str | None:
        stop = None
        for callback in self.callbacks:
            if callback.on_eval(prefix, stage, metrics) and stop is None:
                stop = repr(callback)
        return stop
