"""TeamTR vs naive sequential vs joint on the default task at a matched rollout budget.

For each method and seed it runs the same configuration (the demo's: a 3-agent team of tiny local
models on teamtr/Arith-v0, behaviour-cloned to a weak start) and reports avg@K before/after on fresh
draws of the training split (the objective the schedules optimise) and avg@K / pass@K after on the
held-out test split (mean and spread over seeds), the stale gap per update index, the raw out-of-region rate, tokens
and wall time per stage, and the split of update time into gradient steps and KL monitoring.

Usage::

    .venv/bin/python benchmarks/compare_trainers.py [--seeds 0 1 2] [--stages 6] [--out runs/compare]
        [--set KEY=VALUE ...]

Prints a table, writes ``compare.json`` and ``compare.png`` under ``--out``. Behaviour cloning runs
once per seed (``sft.cache_dir``): every method of a seed starts from the same cloned team.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainers.config import config_from_overrides
from trainers.run import run_training

METHODS = ("teamtr", "naive_sequential", "joint")


def _gap(update: dict) -> float | None:
    """An update's stale gap, or None where it is not defined (first update, joint)."""
    gap = update.get("stale_gap")
    return None if gap is None or math.isnan(gap) else float(gap)


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--stages", type=int, default=6)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--reuse", action="store_true", help="load runs whose summary.json already exists in --out"
    )
    parser.add_argument(
        "--skip-missing", action="store_true", help="with --reuse: report only finished runs"
    )
    args = parser.parse_args()
    console = Console(width=170)
    console.print(f"command: {' '.join([sys.executable, *sys.argv])}")
    results: dict[str, list[dict]] = {m: [] for m in args.methods}
    for seed in args.seeds:
        for method in args.methods:
            config = config_from_overrides(
                [
                    *args.overrides,
                    f"schedule.method={method}",
                    f"schedule.stages={args.stages}",
                    f"seed={seed}",
                    f"run_dir={args.out / f'{method}-seed{seed}'}",
                    "progress=false",
                    # the methods of one seed start from the same behaviour-cloned team: clone once
                    f"sft.cache_dir={args.out / 'bc-cache'}",
                ],
            )
            done = Path(config.run_dir) / "summary.json"
            if args.reuse and done.exists():
                results[method].append(json.loads(done.read_text()))
                continue
            if args.skip_missing:
                continue
            t0 = time.perf_counter()
            summary = run_training(config, console=Console(file=io.StringIO()))
            console.print(
                f"{method} seed {seed}: {time.perf_counter() - t0:.0f} s, after {summary['after']}"
            )
            results[method].append(summary)

    k = config_from_overrides(args.overrides).eval.k
    seeds = {m: len(r) for m, r in results.items()}
    table = Table(title=f"matched rollout budget, seeds per method {seeds}, {args.stages} stages")
    for col in (
        "method",
        f"train avg@{k} before",
        f"train avg@{k} after",
        f"test avg@{k} after",
        f"test pass@{k} after",
        "Δ_stale / stage",
        "out-of-region (raw)",
        "rollouts / stage",
        "tokens / stage",
        "wall s / stage",
        "KL monitor share of update",
    ):
        table.add_column(col, justify="right" if col != "method" else "left")
    rows = {}
    for method, runs in results.items():
        if not runs:
            continue
        stages = [r["stages"] for r in runs]
        gaps = [g for r in runs for u in r["updates"] if (g := _gap(u)) is not None]
        per_stage_gap = sum(gaps) / max(sum(stages), 1) if gaps else None
        update_s = [r["totals"].get("update_s", 0.0) for r in runs]
        rows[method] = {
            "avg_before": [r["before"][f"train_eval/avg@{k}"] for r in runs],
            "avg_after": [r["after"][f"train_eval/avg@{k}"] for r in runs],
            "test_avg_after": [r["after"][f"eval/avg@{k}"] for r in runs],
            "test_pass_after": [r["after"][f"eval/pass@{k}"] for r in runs],
            "delta_stale_per_stage": per_stage_gap,
            "out_of_region": statistics.mean(r["out_of_region_rate"] for r in runs),
            "rollouts_per_stage": statistics.mean(
                r["totals"]["rollouts"] / r["stages"] for r in runs
            ),
            "tokens_per_stage": statistics.mean(r["totals"]["tokens"] / r["stages"] for r in runs),
            "wall_per_stage": statistics.mean(
                r["totals"].get("stage_wall_s", 0.0) / r["stages"] for r in runs
            ),
            "monitor_share": statistics.mean(
                r["totals"].get("monitor_s", 0.0) / max(r["totals"].get("monitor_s", 0.0) + u, 1e-9)
                for r, u in zip(runs, update_s)
            ),
            "stale_gap_by_index": _gap_by_index(runs),
        }
        row = rows[method]
        table.add_row(
            method,
            spread(row["avg_before"]),
            spread(row["avg_after"]),
            spread(row["test_avg_after"]),
            spread(row["test_pass_after"]),
            "-" if per_stage_gap is None else f"{per_stage_gap:.4f}",
            f"{row['out_of_region']:.2f}",
            f"{row['rollouts_per_stage']:.0f}",
            f"{row['tokens_per_stage']:.0f}",
            f"{row['wall_per_stage']:.1f}",
            f"{row['monitor_share']:.1%}",
        )
    console.print(table)
    for method, row in rows.items():
        console.print(f"stale gap by update index, {method}: {row['stale_gap_by_index']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(rows, indent=2))
    _plot(rows, k, args.out / "compare.png")
    console.print(f"wrote {args.out / 'compare.json'} and {args.out / 'compare.png'}")
    return 0


def _gap_by_index(runs: list[dict]) -> dict[int, float]:
    by_index: dict[int, list[float]] = {}
    for r in runs:
        for u in r["updates"]:
            if (gap := _gap(u)) is not None:
                by_index.setdefault(u["index"], []).append(gap)
    return {i: round(statistics.mean(v), 5) for i, v in sorted(by_index.items())}


def _plot(rows: dict, k: int, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    names = list(rows)
    ax1.bar(
        names,
        [statistics.mean(rows[n]["avg_after"]) for n in names],
        yerr=[
            statistics.stdev(rows[n]["avg_after"]) if len(rows[n]["avg_after"]) > 1 else 0
            for n in names
        ],
    )
    ax1.set_title(f"train-split avg@{k} after training")
    for n in names:
        gaps = rows[n]["stale_gap_by_index"]
        if gaps:
            ax2.plot(list(gaps), list(gaps.values()), marker="o", label=n)
    ax2.set_title("stale gap by update index")
    ax2.set_xlabel("update index i")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
