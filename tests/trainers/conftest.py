"""Fixtures of the trainer tests."""

from __future__ import annotations

import pytest
from helpers_trainers import TrainedRun, trained_run


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """One finished small TeamTR run on tiny models, trained once per session and read by every
    test that only checks a finished run's files, summary, output or callbacks (a whole run
    costs seconds; the tests that change a setting train their own)."""
    return trained_run(tmp_path_factory.mktemp("trained") / "run")
