"""A simulated crash of a training run after N stages, for the tests of resuming, overwriting and
comparing interrupted runs (tests/trainers, tests/reliability).

It lives beside tests/conftest.py, whose folder is on ``sys.path`` for every test; the trainer
tests import it through ``helpers_trainers``.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainers.learners.callbacks import Callback


class SimulatedCrash(Exception):
    """Raised by :class:`CrashAfter`: the run "crashed" after a stage's checkpoint was saved."""


class CrashAfter(Callback):
    """Crashes a run after ``stages`` completed stages: ``on_stage_end`` (called after the stage's
    checkpoint is saved) raises :class:`SimulatedCrash`."""

    def __init__(self, stages: int) -> None:
        self.stages = stages

    def __repr__(self) -> str:
        return f"CrashAfter({self.stages})"

    def on_stage_end(self, stage: int, metrics: Mapping[str, float]) -> bool | None:
        if stage >= self.stages:
            raise SimulatedCrash(f"simulated crash after stage {stage}")
        return None
