"""Fixtures of the fault tests: one small finished run per test process, and a scratch working
directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_reliability import RUN_CONFIG

from teamtr_cli import main


@pytest.fixture(scope="session")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-stage run of the demo task (``teamtr train``, tiny settings). Tests only
    read it; a test that changes a run works on ``copy_run(run, tmp_path)``."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "run.yaml").write_text(RUN_CONFIG, encoding="utf-8")
    argv = ["train", "--config", str(folder / "run.yaml"), "--run-dir", str(folder / "RUN")]
    assert main(argv) == 0
    return folder / "RUN"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fault tests that read :func:`run` run on one worker of a parallel run, which trains it
    once (a session fixture is built once per worker that needs it)."""
    here = Path(__file__).parent
    for item in items:
        if "run" in getattr(item, "fixturenames", ()) and here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("reliability-run"))


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder as the working directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
