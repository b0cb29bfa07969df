"""``teamtr diagnostics RUN_DIR``: the table of a run's per-stage diagnostics."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table


def add_parser(sub: argparse._SubParsersAction) -> None:
    diag = sub.add_parser(
        "diagnostics",
        help="a run's per-stage diagnostics (D_occ, stale gap, improvement vs certificate, ...)",
    )
    diag.add_argument("run_dir", type=Path, help="a training run (finished or in progress)")
    diag.add_argument("--json", type=Path, help="also write the per-stage values as JSON")


def cmd_diagnostics(args: argparse.Namespace, console: Console) -> int:
    """``teamtr diagnostics RUN_DIR``: the table of a run's per-stage diagnostics."""
    from trainers.run.report import run_diagnostics

    stages = run_diagnostics(args.run_dir)
    if not stages:
        console.print(
            f"{args.run_dir} has no diagnostics yet (no finished stage, or diagnostics: off)"
        )
        return 0

    def num(stage: dict[str, float], key: str, fmt: str = ".3f") -> str | None:
        value = stage.get(key)
        return None if value is None else format(value, fmt)

    def col(key: str, fmt: str) -> Callable[[dict[str, float]], str | None]:
        return lambda stage: num(stage, key, fmt)

    def change(stage: dict[str, float]) -> str | None:
        x, y = num(stage, "diag/j_before", ".2f"), num(stage, "diag/j_after", ".2f")
        return None if x is None or y is None else f"{x}->{y}"

    columns: list[tuple[str, Callable[[dict[str, float]], str | None]]] = [
        ("D_occ", col("diag/d_occ", ".2f")),
        ("floor", col("diag/d_occ_noise_floor", ".2f")),
        ("Δ_stale", col("stage/delta_stale", ".3f")),
        ("floor", col("stage/delta_stale_noise_floor", ".3f")),
        ("J", change),
        ("ΔJ", col("diag/improvement", "+.3f")),
        ("bound", col("diag/certificate_lb", ".2f")),
        ("Σζ", col("diag/zeta_proxy", ".2f")),
        ("flip25", col("diag/flip_rate_25", ".2f")),
        ("flip50", col("diag/flip_rate_50", ".2f")),
        ("ESS/B", col("diag/iw_ess_over_b", ".2f")),
    ]
    shown = [(t, f) for t, f in columns if any(f(s) is not None for s in stages)]
    table = Table(
        title=f"diagnostics of {args.run_dir} (docs/diagnostics.md)",
        box=None,
        padding=(0, 1),
        collapse_padding=True,
        header_style="bold underline",
    )
    table.add_column("stage", justify="right", no_wrap=True)
    for title, _ in shown:
        table.add_column(title, justify="right", no_wrap=True)
    for stage in stages:
        table.add_row(str(stage["stage"]), *(f(stage) or "-" for _, f in shown))
    console.print(table)
    last = stages[-1]
    if "diag/violation_rate" in last:
        rho = last.get("diag/rank_corr")
        console.print(
            f"certificate over {len(stages)} stages: violation rate "
            f"{last['diag/violation_rate']:.2f}, rank correlation with the improvement "
            + ("undefined" if rho is None else f"{rho:+.2f}")
        )
    if args.json is not None:
        args.json.write_text(json.dumps(stages, indent=2))
        console.print(f"wrote {args.json}")
    return 0
