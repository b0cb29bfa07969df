"""A trained tiny run to swap agents in (shared by the swap tests of trainers and the CLI)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from teamtr_env.config import from_dict
from trainers.config import TrainConfig
from trainers.run import run_training

SMALL = {
    # One-digit sums with empty system prompts: tiny contexts, a few seconds per run.
    "task": "teamtr/Arith-v0",
    "task_options": {"digits": 1, "system_prompts": {"solver": "", "critic": "", "aggregator": ""}},
    "sampling": {"max_new_tokens": 6},
    "sft": {"problems": 8, "steps": 2, "batch_size": 8},
    "schedule": {"stages": 1, "problems_per_batch": 2, "group_size": 2},
    "eval": {"problems": 4, "k": 2},
    "progress": False,
}


def trained_run(run_dir: Path) -> Path:
    """A one-stage TeamTR run of three tiny agents in ``run_dir``."""
    run_training(
        from_dict(TrainConfig, {**SMALL, "run_dir": str(run_dir)}),
        console=Console(file=io.StringIO()),
    )
    return run_dir


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (to prove it untouched)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
