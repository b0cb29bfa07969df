"""What the fault tests share: a small run's configuration, and the checks that a command was
refused (exit 2) and that a folder holds what it held."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from teamtr_cli import main

RUN_CONFIG = """\
task: teamtr/Pipeline-v0
sft: {problems: 8, steps: 2, batch_size: 8}
schedule: {stages: 1, problems_per_batch: 2, group_size: 2}
eval: {problems: 4, k: 2, train_distribution: false}
sampling: {max_new_tokens: 6}
progress: false
loggers: []
plot: false
"""
"""One stage of the demo task at tiny settings (seconds)."""

EVAL = ["--k", "1", "--problems", "2", "--no-progress"]
"""The smallest evaluation: one episode of each of two problems."""


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``teamtr ARGV``, expects exit 2 and returns what it said on stderr (one line per
    problem: no hard wraps)."""
    assert main(argv) == 2
    return capsys.readouterr().err


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``teamtr ARGV``, expects argparse's exit 2 and returns its message."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return " ".join(capsys.readouterr().err.split())


def files(folder: Path) -> list[str]:
    """Every path under ``folder``, relative and sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def copy_run(run: Path, where: Path) -> Path:
    """A copy of ``run`` in ``where`` whose name has a space, as users give them."""
    copy = where / "copy of run"
    shutil.copytree(run, copy)
    return copy
