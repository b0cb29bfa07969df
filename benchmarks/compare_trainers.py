"""TeamTR vs naive sequential vs joint on the demo's team task, at an equal budget per update.

For each method and seed it runs the same configuration (the demo's: a team of tiny local models on
teamtr/Pipeline-v0, where each agent does one step of a chain and sees only the previous message,
behaviour-cloned to a weak start) and reports held-out avg@K / pass@K before and after (mean with a
95% t-interval over seeds), avg@K on fresh draws of the training split, the stale gap
Delta_stale per stage beside its noise floor (the same surrogate on two independent batches of one
team), the raw out-of-region rate, rollouts, tokens and wall time per stage, and the split of stage
time into rollouts, gradient steps, KL monitoring and diagnostics.

The budget is the config's ``schedule.budget``, ``disjoint`` by default: every update gets its own
B prompts x G rollouts (naive sequential and joint update agent i on the i-th disjoint slice of the
stage-start batch, TeamTR on a fresh batch of the partially updated team), so data, gradient work
and tokens per update are equal and only staleness differs.

Usage::

    .venv/bin/python benchmarks/compare_trainers.py [--seeds 0 1 2 3 4] [--stages 8] [--agents 3]
        [--trainers ID ...] [--out runs/compare] [--quick] [--set KEY=VALUE ...]

``--trainers`` takes any registered learner (``teamtr learners`` lists them, plugins included) or
a built-in's short name (default: ``teamtr naive_sequential joint``).

``--agents N`` sets the team size (the pipeline's chain gets N steps, agents step1..stepN).
``--quick`` is a minutes-long smoke run (one seed, two stages, small batches and evaluations).

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

from trainers.config import DEMO_TASK_OPTIONS, config_from_overrides
from trainers.recipe import run_training
from trainers.registry import RegistryError, learner_spec

METHODS = ("teamtr", "naive_sequential", "joint")
# Two-sided 95% t quantiles by degrees of freedom (no scipy dependency for one table).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
QUICK = [
    "sft.steps=200",
    "sft.problems=300",
    "schedule.problems_per_batch=8",
    "eval.problems=40",
    "eval.train_distribution=false",
]


def team_overrides(agents: int) -> list[str]:
    """``--set`` lines for an ``agents``-step pipeline with agents step1..stepN (no system prompts)."""
    names = [f"step{i + 1}" for i in range(agents)]
    options = {
        **DEMO_TASK_OPTIONS,
        "steps": agents,
        "agents": names,
        "system_prompts": {a: "" for a in names},
    }
    return [f"task_options={json.dumps(options)}"]


def ci95(values: list[float]) -> str:
    """``mean ± half-width`` of the 95% t-interval over seeds (``mean`` alone for one seed)."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    half = _T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{statistics.mean(values):.3f} ± {half:.3f}"


def _gap(update: dict, key: str = "stale_gap") -> float | None:
    """An update's stale gap (or noise floor), or None where it is not defined (first update,
    joint)."""
    gap = update.get(key)
    return None if gap is None or math.isnan(gap) else float(gap)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--stages", type=int, default=None, help="default: the config's")
    parser.add_argument("--agents", type=int, default=None, help="team size (pipeline steps)")
    parser.add_argument("--quick", action="store_true", help="a minutes-long smoke run")
    parser.add_argument(
        "--trainers",
        "--methods",
        dest="methods",
        nargs="+",
        default=list(METHODS),
        metavar="ID",
        help="registered learner ids or short names (`teamtr learners`); default: the built-ins",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--reuse", action="store_true", help="load runs whose summary.json already exists in --out"
    )
    parser.add_argument(
        "--skip-missing", action="store_true", help="with --reuse: report only finished runs"
    )
    args = parser.parse_args()
    try:
        for method in args.methods:
            learner_spec(method).load()
    except RegistryError as exc:
        parser.error(str(exc))
    if args.quick:
        args.seeds, args.stages = args.seeds[:1], args.stages or 2
        args.overrides = [*QUICK, *args.overrides]
    if args.agents is not None:
        args.overrides = [*team_overrides(args.agents), *args.overrides]
    if args.stages is not None:
        args.overrides = [*args.overrides, f"schedule.stages={args.stages}"]
    console = Console(width=170)
    console.print(f"command: {' '.join([sys.executable, *sys.argv])}")
    results: dict[str, list[dict]] = {m: [] for m in args.methods}
    for seed in args.seeds:
        for method in args.methods:
            config = config_from_overrides(
                [
                    *args.overrides,
                    f"schedule.learner={method}",
                    "diagnostics=full",
                    f"seed={seed}",
                    f"run_dir={args.out / (method.replace('/', '_') + f'-seed{seed}')}",
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
            # the comparison's own run directory: rerun it unless --reuse found it finished
            summary = run_training(config, console=Console(file=io.StringIO()), overwrite=True)
            console.print(
                f"{method} seed {seed}: {time.perf_counter() - t0:.0f} s, after {summary['after']}"
            )
            results[method].append(summary)

    base = config_from_overrides(args.overrides)
    k = base.eval.k
    seeds = {m: len(r) for m, r in results.items()}
    table = Table(
        title=f"{base.task}, budget '{base.schedule.budget}', seeds per method {seeds}, "
        f"{base.schedule.stages} stages; held-out = {base.eval.split} split, 95% t-intervals "
        "over seeds"
    )
    for col in (
        "method",
        f"held-out avg@{k} before",
        f"held-out avg@{k} after",
        f"held-out pass@{k} after",
        f"train avg@{k} after",
        "Δ_stale / stage",
        "noise floor / stage",
        "out-of-region (raw)",
        "rollouts / stage",
        "tokens / stage",
        "wall s / stage",
        "rollout / update / KL monitor / diagnostics s per stage",
    ):
        table.add_column(col, justify="right" if col != "method" else "left")
    rows = {}
    for method, runs in results.items():
        if not runs:
            continue
        stages = [r["stages"] for r in runs]
        gaps = [g for r in runs for u in r["updates"] if (g := _gap(u)) is not None]
        floors = [
            g for r in runs for u in r["updates"] if (g := _gap(u, "noise_floor")) is not None
        ]
        per_stage_gap = sum(gaps) / max(sum(stages), 1) if gaps else None
        curves = [_reward_by_stage(r) for r in runs]  # each run's metrics.jsonl, read once
        per_stage_floor = sum(floors) / max(sum(stages), 1) if floors else None
        rows[method] = {
            "test_avg_before": [r["before"][f"eval/avg@{k}"] for r in runs],
            "test_avg_after": [r["after"][f"eval/avg@{k}"] for r in runs],
            "test_pass_after": [r["after"][f"eval/pass@{k}"] for r in runs],
            "avg_after": [r["after"].get(f"train_eval/avg@{k}", math.nan) for r in runs],
            "eval_problems_distinct": [r.get("eval_problems_distinct") for r in runs],
            "delta_stale_per_stage": per_stage_gap,
            "noise_floor_per_stage": per_stage_floor,
            "out_of_region": statistics.mean(r["out_of_region_rate"] for r in runs),
            "rollouts_per_stage": statistics.mean(
                r["totals"]["rollouts"] / r["stages"] for r in runs
            ),
            "tokens_per_stage": statistics.mean(r["totals"]["tokens"] / r["stages"] for r in runs),
            "wall_per_stage": statistics.mean(
                r["totals"].get("stage_wall_s", 0.0) / r["stages"] for r in runs
            ),
            "seconds_per_stage": {
                part: statistics.mean(r["totals"].get(f"{part}_s", 0.0) / r["stages"] for r in runs)
                for part in ("rollout", "update", "monitor", "diagnostic")
            },
            "stale_gap_by_index": _gap_by_index(runs),
            "reward_by_stage": [curve for curve, _ in curves],
            "reward_by_stage_metric": sorted({metric for _, metric in curves}),
        }
        row = rows[method]
        cost = row["seconds_per_stage"]
        table.add_row(
            method,
            ci95(row["test_avg_before"]),
            ci95(row["test_avg_after"]),
            ci95(row["test_pass_after"]),
            ci95([v for v in row["avg_after"] if not math.isnan(v)]),
            "-" if per_stage_gap is None else f"{per_stage_gap:.4f}",
            "-" if per_stage_floor is None else f"{per_stage_floor:.4f}",
            f"{row['out_of_region']:.2f}",
            f"{row['rollouts_per_stage']:.0f}",
            f"{row['tokens_per_stage']:.0f}",
            f"{row['wall_per_stage']:.1f}",
            " / ".join(f"{cost[p]:.1f}" for p in ("rollout", "update", "monitor", "diagnostic")),
        )
    console.print(table)
    for method, row in rows.items():
        console.print(f"stale gap by update index, {method}: {row['stale_gap_by_index']}")
    for method, row in rows.items():
        curve = [ci95(list(v)) for v in zip(*row["reward_by_stage"])]
        console.print(f"training reward by stage ({_what(row)}), {method}: {', '.join(curve)}")
    first = next(iter(rows), None)
    for method, row in rows.items():
        if method == first or len(row["reward_by_stage"]) != len(rows[first]["reward_by_stage"]):
            continue
        mixed = rows[first]["reward_by_stage_metric"] + row["reward_by_stage_metric"]
        # paired by seed: the methods of a seed start from the same behaviour-cloned team
        diffs = [
            [a - b for a, b in zip(x, y)]
            for x, y in zip(rows[first]["reward_by_stage"], row["reward_by_stage"])
        ]
        curve = [ci95(list(v)) for v in zip(*diffs)]
        console.print(
            f"paired {first} - {method}, training reward by stage "
            f"({_what({'reward_by_stage_metric': sorted(set(mixed))})}): " + ", ".join(curve)
        )
        after = [a - b for a, b in zip(rows[first]["test_avg_after"], row["test_avg_after"])]
        console.print(f"paired {first} - {method}, held-out avg@{k} after: {ci95(after)}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(rows, indent=2))
    _plot(rows, k, args.out / "compare.png")
    console.print(f"wrote {args.out / 'compare.json'} and {args.out / 'compare.png'}")
    return 0


def _reward_by_stage(summary: dict) -> tuple[list[float], str]:
    """The run's training reward per stage under the stage-start team (``stage/reward_start`` in
    its metrics.jsonl: comparable across learners); runs logged before that metric existed give
    ``stage/reward_mean``, which for TeamTR includes batches of partially updated teams."""
    path = Path(summary["paths"]["metrics"])
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    key = (
        "stage/reward_start"
        if any("stage/reward_start" in r for r in rows)
        else "stage/reward_mean"
    )
    by_step = {r["step"]: r[key] for r in rows if key in r}
    return [by_step[s] for s in sorted(by_step)], key


def _what(row: dict) -> str:
    """What a row's reward curve measures (runs logged before ``stage/reward_start`` existed
    give the mean over all of a stage's training batches)."""
    if row["reward_by_stage_metric"] == ["stage/reward_start"]:
        return "stage-start team"
    return "mean of the stage's training batches; for TeamTR partly after updates"


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
        [statistics.mean(rows[n]["test_avg_after"]) for n in names],
        yerr=[
            statistics.stdev(rows[n]["test_avg_after"]) if len(rows[n]["test_avg_after"]) > 1 else 0
            for n in names
        ],
    )
    ax1.set_title(f"held-out avg@{k} after training (± std over seeds)")
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
