"""The tables and lines ``teamtr eval`` prints: a report's metrics, its breakdown by a problem's
``meta`` key, protocols compared, and the coordination line."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from teamtr_env.evaluation import EvalReport

__all__ = ["breakdown_table", "comparison_table", "coordination_line", "report_table"]


def report_table(report: EvalReport, title: str) -> Table:
    """The metrics with their intervals, then the task's own (``task_metrics``: a graded game's
    mean score, which pass@k only thresholds), in a section of their own without intervals or
    counts (a task's metric may cover a subset of the problems, such as a size bucket)."""
    table = Table(title=title)
    for col in ("metric", "mean", "95% CI", "problems"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    for name, m in report.metrics.items():
        table.add_row(
            name, f"{m.mean:.3f}", f"[{m.ci_low:.3f}, {m.ci_high:.3f}]", str(m.n_problems)
        )
    if report.task_metrics:
        table.add_section()
    for name, value in report.task_metrics.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        table.add_row(name, shown, "", "")
    return table


def breakdown_table(report: EvalReport, key: str, groups: dict[str, dict[str, Any]]) -> Table:
    """pass@1 / avg@K / pass@K per value of one ``meta`` key."""
    k = report.k
    table = Table(title=f"by {key}")
    for col in (key, "problems", "pass@1", f"avg@{k}", f"pass@{k}"):
        table.add_column(col, justify="left" if col == key else "right")
    for value, sub in groups.items():
        m = sub["metrics"]
        cells = [
            f"{m[name].mean:.3f}" if name in m else "-"
            for name in ("pass@1", f"avg@{k}", f"pass@{k}")
        ]
        table.add_row(value, str(sub["n_problems"]), *cells)
    return table


def comparison_table(payloads: list[dict[str, Any]], args: argparse.Namespace) -> Table:
    """One row per protocol: accuracy (± half the 95% bootstrap interval), consensus-on-correct and
    the budget actually used (messages and tokens per episode)."""
    k = args.k
    table = Table(title=f"{args.task_id}: protocols compared (K={k})")
    cols = ("protocol", "msgs/ep", "tokens/ep", f"avg@{k}", f"pass@{k}", f"maj@{k}", "consensus")
    for col in cols:
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for p in payloads:
        m = p["metrics"]

        def cell(name: str, m: dict[str, Any] = m) -> str:
            e = m.get(name)
            return f"{e['mean']:.3f}±{(e['ci_high'] - e['ci_low']) / 2:.2f}" if e else "-"

        coord = p.get("coordination") or {}
        cons = coord.get("consensus_on_correct")
        table.add_row(
            p["protocol"]["name"] if p["protocol"] else "team",
            f"{p['tokens']['messages_per_episode']:.1f}",
            f"{p['tokens']['per_episode']:.1f}",
            cell(f"avg@{k}"),
            cell(f"pass@{k}"),
            cell(f"maj@{k}"),
            "-" if cons is None else f"{cons:.3f}",
        )
    return table


def coordination_line(c: dict[str, Any]) -> str:
    """A team's coordination (``EvalReport.coordination``) on one line."""

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return (
        f"coordination: consensus-on-correct {f(c['consensus_on_correct'])}, agreement "
        f"{f(c['agreement'])}, regression rate {f(c['regression_rate'])} "
        f"({c['regressions']}/{c['transitions_from_correct']}), fix rate {f(c['fix_rate'])} "
        f"({c['fixes']}/{c['transitions_from_wrong']})"
    )
