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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that read :func:`trained` run on one worker of a parallel run, which trains it
    once (a session fixture is built once per worker that needs it)."""
    for item in items:
        if "trained" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("trained"))
