"""The run's figure (``curves.png``): the handful of panels a reader of a run needs, and nothing
that TensorBoard already shows better.

* **Held-out before and after**: avg@K and pass@K of the final evaluation against the one
  before training, with their 95% bootstrap intervals over distinct problems (two measurements,
  drawn as points with error bars, not as a curve).
* **Reward by stage**: the training batches' mean team reward, with the validation avg@K where
  the run validates (``eval.every``).
* **KL against the radius**: every update's raw KL (the full step) and kept KL, with its
  trust-region radius (a run without one draws the KL alone).
* **Out-of-region rate** by stage: the share of updates whose full step left the region.
* **Occupancy drift** by stage (``diag/d_occ``, ``diag/d_occ_lr``), where the diagnostics
  measured it.

A panel without data is left out. Every other series (timings, counts, constants, per-agent
metrics) is in ``metrics.jsonl`` and TensorBoard; :func:`trainers.run.logger.plot_learning_curves`
draws any of them. The figure records its panels' titles in the PNG's ``Panels`` text chunk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainers.run.logger import metric_series

PANEL_WIDTH, PANEL_HEIGHT = 4.5, 3.4
"""Inches per panel (at dpi 100: 450 x 340 pixels)."""


def plot_run_figure(
    metrics_path: str | Path,
    summary: Mapping[str, Any],
    png_path: str | Path,
    *,
    k: int,
    title: str = "",
) -> list[str]:
    """Draws the run's figure (see the module docstring) from its ``metrics.jsonl`` and its
    summary (``before``/``after`` with their intervals, ``updates``), saves it at ``png_path``
    and returns the titles of its panels, in order.

    Args:
        metrics_path: the run's ``metrics.jsonl``.
        summary: the run's summary (:func:`trainers.run.report.build_summary`).
        png_path: where to save the PNG (dpi 100); parent folders are made.
        k: the evaluation's K (``eval.k``), which names the metrics.
        title: the figure's title.
    """
    from matplotlib.figure import Figure  # no pyplot: Agg canvas, no global state
    from matplotlib.ticker import MaxNLocator

    series = _stage_series(metrics_path)
    panels = [
        panel
        for panel in (
            _held_out(summary, k),
            _reward(series, k),
            _kl(summary.get("updates", [])),
            _out_of_region(series),
            _occupancy(series),
        )
        if panel is not None
    ]
    ncols = min(3, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig = Figure(figsize=(PANEL_WIDTH * ncols, PANEL_HEIGHT * nrows + 0.5), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    titles = []
    for ax, (name, draw) in zip(axes, panels):
        draw(ax)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # stages and updates are counts
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
        titles.append(name)
    if not panels:
        axes[0].text(0.5, 0.5, "no data", ha="center", va="center", transform=axes[0].transAxes)
    fig.suptitle(title, fontsize=11)
    out = Path(png_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, format="png", metadata={"Panels": " | ".join(titles)})
    return titles


def _stage_series(path: str | Path) -> dict[str, list[tuple[int, float]]]:
    """The series of ``metrics.jsonl`` (:func:`~trainers.run.logger.metric_series`), finite
    values only."""
    return {
        key: finite
        for key, points in metric_series(path).items()
        if (finite := [(step, value) for step, value in points if math.isfinite(value)])
    }


Panel = tuple[str, Any]


def _held_out(summary: Mapping[str, Any], k: int) -> Panel | None:
    names = [f"eval/avg@{k}", f"eval/pass@{k}"]
    when = {"before": summary.get("before", {}), "after": summary.get("after", {})}
    intervals = {"before": summary.get("before_ci", {}), "after": summary.get("after_ci", {})}
    if not any(name in when["after"] for name in names):
        return None

    def draw(ax: Any) -> None:
        for shift, name, marker in ((-0.08, names[0], "o"), (0.08, names[1], "s")):
            xs, ys, low, high = [], [], [], []
            for x, moment in enumerate(("before", "after")):
                value = when[moment].get(name)
                if value is None:
                    continue
                ci = intervals[moment].get(name, [value, value])
                xs.append(x + shift)
                ys.append(value)
                low.append(value - ci[0])
                high.append(ci[1] - value)
            label = name.removeprefix("eval/")
            ax.errorbar(xs, ys, yerr=[low, high], fmt=marker, capsize=4, label=label)
        ax.set_xticks([0, 1], ["before training", "after training"])
        ax.set_xlim(-0.5, 1.5)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8, loc="best")

    return "held-out, 95% CI over problems", draw


def _reward(series: Mapping[str, list[tuple[int, float]]], k: int) -> Panel | None:
    reward = series.get("stage/reward_mean")
    if not reward:
        return None

    def draw(ax: Any) -> None:
        ax.plot(*zip(*reward), marker=".", label="training batch reward")
        validation = series.get(f"val/avg@{k}")
        if validation:
            ax.plot(*zip(*validation), marker=".", label=f"validation avg@{k}")
        ax.set_xlabel("stage")
        ax.legend(fontsize=8, loc="best")

    return "team reward by stage", draw


def _kl(updates: Sequence[Mapping[str, Any]]) -> Panel | None:
    raw = [_finite(u.get("kl_raw")) for u in updates]
    if not any(v is not None for v in raw):
        return None
    kept = [_finite(u.get("kl_tok")) for u in updates]
    radius = [_finite(u.get("delta")) for u in updates]

    def draw(ax: Any) -> None:
        xs = range(1, len(updates) + 1)
        ax.plot(xs, [math.nan if v is None else v for v in raw], ".", label="raw KL (full step)")
        ax.plot(xs, [math.nan if v is None else v for v in kept], "x", label="kept KL")
        if any(r is not None for r in radius):
            ys = [math.nan if r is None else r for r in radius]
            ax.step(xs, ys, where="mid", color="black", lw=1, label="radius delta")
        ax.set_xlabel("update")
        ax.legend(fontsize=8, loc="best")

    return "token KL per update", draw


def _out_of_region(series: Mapping[str, list[tuple[int, float]]]) -> Panel | None:
    rate = series.get("stage/out_of_region_rate")
    if not rate:
        return None

    def draw(ax: Any) -> None:
        xs, ys = zip(*rate)
        ax.bar(xs, ys, width=0.6)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("stage")

    return "out-of-region rate (raw KL > delta)", draw


def _occupancy(series: Mapping[str, list[tuple[int, float]]]) -> Panel | None:
    keys = {"diag/d_occ": "D_occ (plug-in)", "diag/d_occ_lr": "D_occ (likelihood ratios)"}
    found = {label: series[key] for key, label in keys.items() if series.get(key)}
    if not found:
        return None

    def draw(ax: Any) -> None:
        for label, points in found.items():
            ax.plot(*zip(*points), marker=".", label=label)
        ax.set_xlabel("stage")
        ax.legend(fontsize=8, loc="best")

    return "occupancy drift of the stale context", draw


def _finite(value: Any) -> float | None:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None
