"""The run's figure (``curves.png``, issue #58 N7): the handful of panels a reader needs (held-out
before and after with CIs, reward by stage, KL against the radius, the out-of-region rate, the
occupancy drift), at a size that fits a screen, read back from the PNG itself."""

from __future__ import annotations

import json
import math
from pathlib import Path

from helpers_trainers import TrainedRun
from PIL import Image
from PIL.PngImagePlugin import PngImageFile

from trainers.run.run_figure import plot_run_figure

PANELS = [
    "held-out, 95% CI over problems",
    "team reward by stage",
    "token KL per update",
    "out-of-region rate (raw KL > delta)",
]


def _png(path: Path) -> tuple[tuple[int, int], list[str]]:
    """The PNG's size in pixels and the panel titles it records."""
    with Image.open(path) as image:
        assert isinstance(image, PngImageFile)
        return image.size, image.text["Panels"].split(" | ")


def test_the_runs_figure_holds_the_panels_a_reader_needs(trained: TrainedRun) -> None:
    """The trained run's figure: four or five panels (the occupancy drift where the diagnostics
    measured it) in two rows of three, not the 33 panels of every logged series."""
    size, panels = _png(trained.run_dir / "curves.png")
    assert panels[:4] == PANELS and len(panels) <= 5
    assert size == (1350, 730)


def test_a_run_without_validation_or_diagnostics_draws_what_it_has(
    trained: TrainedRun, tmp_path: Path
) -> None:
    """Panels without data are left out: no updates, no out-of-region series, no drift. The
    before/after intervals are the summary's."""
    metrics = tmp_path / "metrics.jsonl"
    lines = [{"step": 1, "time": 0.0, "stage/reward_mean": 0.25, "stage/wall_s": 3.0}]
    metrics.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    summary = {
        "before": {"eval/avg@2": 0.1, "eval/pass@2": 0.2},
        "after": {"eval/avg@2": 0.5, "eval/pass@2": 0.6},
        "before_ci": {"eval/avg@2": [0.0, 0.2], "eval/pass@2": [0.1, 0.3]},
        "after_ci": {"eval/avg@2": [0.4, 0.6], "eval/pass@2": [0.5, 0.7]},
        "updates": [{"kl_raw": math.nan, "kl_tok": math.nan, "delta": math.inf}],
    }
    titles = plot_run_figure(metrics, summary, tmp_path / "f.png", k=2, title="t")
    assert titles == PANELS[:2]
    assert _png(tmp_path / "f.png") == ((900, 390), PANELS[:2])
