"""A trained tiny run to swap agents in (shared by the swap tests of trainers and the CLI)."""

from __future__ import annotations

import io
from pathlib import Path

from helpers_trainers import small
from rich.console import Console

from trainers.run.recipe import run_training


def trained_run(run_dir: Path) -> Path:
    """A one-stage TeamTR run of three tiny agents in ``run_dir``."""
    run_training(small(run_dir, schedule__stages=1), console=Console(file=io.StringIO()))
    return run_dir


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (to prove it untouched)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
