"""Team-size scaling with tiny language models (paper App. G.1, Table 5): does naive sequential's
stale penalty grow faster with the team size n than TeamTR's?

Usage::

    .venv/bin/python benchmarks/lm_team_size.py --out runs/lm-team-size [--quick]
        [--ns 2 3 4 6] [--seeds 0 1 2 3 4 5 6 7] [--json OUT.json] [--plot OUT.png]

For every n, one ``teamtr compare`` (:func:`trainers.tools.compare.compare`) of TeamTR and naive
sequential on ``teamtr/Convention-v0`` with n agents (``benchmarks/configs/convention.yaml``:
three-letter secrets, two conventions, the experts cloned on reverse, identity, ..., identity, so
the cloned team is miscoordinated and a later agent must read its predecessor's current
convention), with the clip out of the way as the real-stack sweep found it must be for the
effect to show (``optim.ratio_clip=10``, beta fixed at 0, 8 epochs; the same grid for both
learners, none tuned alone), at an equal budget (B prompts x G rollouts per update), every run
of an n starting from one behaviour clone (the seeds vary the training rollouts and the
evaluation problems). ``OUT/n<N>/`` holds each comparison (continued when it is there).

Per n and learner it reports the held-out avg@4 after training (the paired difference naive -
TeamTR with its 95% CI over seeds and problems), the stale gap Delta_stale and its noise floor,
and D_occ by likelihood ratios (``diag/d_occ_lr``, docs/diagnostics.md: it needs no context to
repeat, where the plug-in D_occ sits at its ceiling on random secrets), each per stage, mean ±
std over seeds. It fits ``x ~ n^alpha`` per learner (``_bench.power_fit``: log-log fit of the
per-n means with a 95% bootstrap CI over seeds; Delta_stale on its excess over the noise floor)
and the difference of the two learners' exponents with a paired bootstrap (the same seeds
resampled for both). It prints a table and writes ``OUT/lm_team_size.json``, ``.md`` and
``.png`` (or ``--json`` / ``--plot``). ``--quick`` (minutes; a slow test runs it) is a smoke run
of n in {2, 3} and two seeds: it checks the machinery, not the claim.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, power_fit, write_outputs
from rich.console import Console

from trainers.diagnostics.estimators import loglog_fit
from trainers.tools.compare import CompareSpec, compare, run_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks/configs/convention.yaml"
LEARNERS = {"teamtr": "teamtr/TeamTR-v0", "naive": "teamtr/NaiveSequential-v0"}
#: The real-stack sweep's lesson: with the ratio clip at 0.2 no update moves a convention far
#: enough for staleness to matter (docs/benchmarks/learners.md, "With the clip out of the way").
NO_CLIP = (
    "optim.ratio_clip=10",
    "trust_region.beta=0",
    "trust_region.adapt_beta=false",
    "optim.epochs=8",
)
#: A smoke run: two-letter secrets, which a short clone learns well enough that updates move.
QUICK = (
    "schedule.stages=2",
    "schedule.problems_per_batch=8",
    "sft.steps=300",
    "sft.problems=1000",
    "eval.problems=40",
    "eval.train_distribution=false",
)
QUANTITIES = ("delta_stale", "d_occ_lr")


def team_overrides(n: int, length: int = 3) -> list[str]:
    """Convention-v0 with agents a1..an: the first cloned on reverse, the rest on identity
    (secrets of ``length`` letters)."""
    names = [f"a{i + 1}" for i in range(n)]
    options = {
        "length": length,
        "conventions": 2,
        "agents": names,
        "expert_transforms": {"a1": "reverse"},
        "system_prompts": dict.fromkeys(names, ""),
    }
    return [f"task_options={json.dumps(options)}"]


def run_n(n: int, seeds: Sequence[int], out: Path, quick: bool) -> tuple[dict[str, Any], int]:
    """The comparison at team size ``n`` (continued if ``out/n<n>`` holds it) and its stages."""
    spec = CompareSpec(
        task="teamtr/Convention-v0",
        learners=tuple(LEARNERS.values()),
        seeds=tuple(seeds),
        out=out / f"n{n}",
        config_file=CONFIG,
        overrides=(*team_overrides(n, 2 if quick else 3), *NO_CLIP, *(QUICK if quick else ())),
    )
    stages = next(iter(run_configs(spec)[LEARNERS["teamtr"]].values())).schedule.stages
    return compare(spec, Console(stderr=True)), stages


def per_stage(values: Sequence[float | None], stages: int) -> list[float | None]:
    """A run's sums over its updates as per-stage means."""
    return [None if v is None else v / stages for v in values]


def cell(data: Mapping[str, Any], learner: str, stages: int) -> dict[str, Any]:
    """One (n, learner): the metric after training and the per-stage diagnostics, per seed."""
    result = data["results"][learner]
    return {
        "seeds": result["seeds"],
        "after": result["after"],
        "before": result["before"],
        "delta_stale": per_stage(result["delta_stale"], stages),
        "noise_floor": per_stage(result["noise_floor"], stages),
        "d_occ_lr": per_stage(result.get("d_occ_lr", [None] * len(result["seeds"])), stages),
    }


def _stat(values: Sequence[float | None]) -> dict[str, float] | None:
    if not values or any(v is None for v in values):
        return None
    x = np.asarray(values, dtype=np.float64)
    return {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0}


def _paired_bootstrap(
    sizes: Mapping[int, int],
    stat: Callable[[Mapping[int, np.ndarray]], float | None],
    resamples: int,
    seed: int,
) -> tuple[float | None, list[float]]:
    """``stat`` on every seed at each n, and on ``resamples`` paired bootstrap resamples (at each
    n the seeds are drawn with replacement, the same draw for both learners); the resamples where
    ``stat`` is ``None`` are left out."""
    from teamtr_env.metrics import bootstrap

    value = stat({n: np.arange(size) for n, size in sizes.items()})
    ns = list(sizes)
    boots = bootstrap(
        lambda idx: stat(dict(zip(ns, idx, strict=True))),
        [sizes[n] for n in ns],
        resamples=resamples,
        rng=np.random.default_rng(seed),
    )
    return value, [float(b) for b in boots]


def _percentile_ci(boots: Sequence[float]) -> list[float]:
    from teamtr_env.metrics import percentile_interval

    return list(percentile_interval(boots))


def exponent_gap(
    naive: Mapping[int, np.ndarray], teamtr: Mapping[int, np.ndarray], resamples: int, seed: int
) -> dict[str, Any] | None:
    """``alpha_naive - alpha_teamtr`` of one quantity, with a paired 95% bootstrap CI: the same
    seeds are resampled for both learners at each n (``None`` where a mean is not positive)."""
    ns = sorted(naive)
    if len(ns) < 2 or any(naive[n].mean() <= 0 or teamtr[n].mean() <= 0 for n in ns):
        return None

    def gap(index: Mapping[int, np.ndarray]) -> float | None:
        a = [float(naive[n][index[n]].mean()) for n in ns]
        b = [float(teamtr[n][index[n]].mean()) for n in ns]
        if min(a) <= 0 or min(b) <= 0:
            return None
        return loglog_fit(ns, a)[0] - loglog_fit(ns, b)[0]

    value, boots = _paired_bootstrap({n: naive[n].size for n in ns}, gap, resamples, seed)
    ci = _percentile_ci(boots) if len(boots) >= 0.95 * resamples and resamples else None
    return {"value": value, "ci": ci, "resamples_used": len(boots)}


def difference_trend(
    per_n: Mapping[str, Mapping[str, Any]], resamples: int, seed: int
) -> dict[str, Any] | None:
    """How the held-out gap ``naive - TeamTR`` changes with n: the least-squares slope of its
    per-n means against n (per added agent), with a paired 95% bootstrap CI (at each n the seeds
    are resampled, the same ones for both learners). A negative slope: naive sequential falls
    further behind as the team grows (the paper's n^2 against n predicts one)."""
    ns = sorted(int(n) for n in per_n)
    if len(ns) < 2:
        return None
    diffs = {
        n: np.asarray(per_n[str(n)]["naive"]["after"], dtype=np.float64)
        - np.asarray(per_n[str(n)]["teamtr"]["after"], dtype=np.float64)
        for n in ns
    }

    def slope(index: Mapping[int, np.ndarray]) -> float:
        means = [float(diffs[n][index[n]].mean()) for n in ns]
        return float(np.polyfit(np.asarray(ns, dtype=np.float64), np.asarray(means), 1)[0])

    value, boots = _paired_bootstrap({n: diffs[n].size for n in ns}, slope, resamples, seed)
    return {
        "slope_per_agent": value,
        "ci": _percentile_ci(boots) if boots else None,
        "per_n": {str(n): float(diffs[n].mean()) for n in ns},
    }


def summarise(
    comparisons: Mapping[int, Mapping[str, Any]], stages: int, resamples: int, seed: int = 0
) -> dict[str, Any]:
    """Per n and learner the cells and the paired difference; per learner the exponents; the
    exponent gaps."""
    rng = np.random.default_rng(seed)
    per_n: dict[str, Any] = {}
    for n, data in sorted(comparisons.items()):
        paired = {p["learner"]: p for p in data["paired"]}[LEARNERS["naive"]]
        per_n[str(n)] = {
            short: cell(data, learner, stages) for short, learner in LEARNERS.items()
        } | {"naive_minus_teamtr": {"mean": paired["mean"], "ci": paired["ci"]}}
    fits: dict[str, Any] = {}
    arrays: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    for short in LEARNERS:
        cells = {int(n): row[short] for n, row in per_n.items()}
        fits[short] = {}
        arrays[short] = {}
        for q in QUANTITIES:
            values = {n: c[q] for n, c in cells.items()}
            if any(None in v for v in values.values()):
                fits[short][q] = None
                continue
            floor = {n: c["noise_floor"] for n, c in cells.items()} if q == "delta_stale" else None
            fits[short][q] = power_fit(values, rng, resamples, floor)
            arrays[short][q] = {
                n: np.asarray(v, dtype=np.float64)
                - (np.asarray(floor[n], dtype=np.float64) if floor else 0.0)
                for n, v in values.items()
            }
    gaps = {
        q: exponent_gap(arrays["naive"][q], arrays["teamtr"][q], resamples, seed)
        if q in arrays["naive"] and q in arrays["teamtr"]
        else None
        for q in QUANTITIES
    }
    return {
        "per_n": per_n,
        "fits": fits,
        "exponent_gap": gaps,
        "difference_trend": difference_trend(per_n, resamples, seed),
    }


def _fmt(stat: Mapping[str, float] | None) -> str:
    return "-" if stat is None else f"{stat['mean']:.3f} ± {stat['std']:.3f}"


def _fmt_fit(fit: Mapping[str, Any] | None) -> str:
    if fit is None or fit.get("value") is None:
        return "no fit" if fit is None else str(fit.get("note", "no fit"))
    ci = fit.get("ci")
    return f"{fit['value']:.2f}" + ("" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]")


def markdown(result: Mapping[str, Any]) -> str:
    """The per-n table and the exponents."""
    rows = []
    for n, row in result["per_n"].items():
        for short in LEARNERS:
            c = row[short]
            diff = row["naive_minus_teamtr"]
            rows.append(
                [
                    n,
                    short,
                    _fmt(_stat(c["before"])),
                    _fmt(_stat(c["after"])),
                    "-"
                    if short == "teamtr"
                    else f"{diff['mean']:+.3f} [{diff['ci'][0]:+.3f}, {diff['ci'][1]:+.3f}]",
                    _fmt(_stat(c["delta_stale"])),
                    _fmt(_stat(c["noise_floor"])),
                    _fmt(_stat(c["d_occ_lr"])),
                ]
            )
    header = [
        "n",
        "learner",
        "held-out avg@4 before",
        "after",
        "naive - TeamTR [95% CI]",
        "Delta_stale / stage",
        "its noise floor",
        "D_occ (ratios) / stage",
    ]
    lines = [markdown_table("Team size with tiny language models", header, rows), ""]
    fit_rows = [
        [
            q,
            *(_fmt_fit(result["fits"][s].get(q)) for s in LEARNERS),
            _fmt_fit(result["exponent_gap"][q]),
        ]
        for q in QUANTITIES
    ]
    lines.append(
        markdown_table(
            "Exponents alpha (x ~ n^alpha, 95% bootstrap CI over seeds)",
            ["quantity", "TeamTR", "naive sequential", "naive - TeamTR (paired)"],
            fit_rows,
        )
    )
    trend = result.get("difference_trend")
    if trend is not None:
        low, high = trend["ci"] or (math.nan, math.nan)
        lines += [
            "",
            f"naive - TeamTR in held-out avg@4 changes by {trend['slope_per_agent']:+.4f} per "
            f"added agent [95% CI {low:+.4f}, {high:+.4f}] (least squares over n, paired "
            "bootstrap over seeds)",
        ]
    return "\n".join(lines)


def plot(result: Mapping[str, Any], path: Path) -> None:
    """Log-log panels of Delta_stale (excess over its floor) and D_occ by ratios against n, and
    the held-out metric against n, for both learners (means with their std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [int(n) for n in result["per_n"]]
    fig, axes = plt.subplots(1, 3, figsize=(12.5, 3.6))
    styles = {"teamtr": ("TeamTR", "#4c72b0"), "naive": ("naive sequential", "#dd8452")}
    for short, (label, color) in styles.items():
        cells = [result["per_n"][str(n)][short] for n in ns]
        excess = [
            None if c["delta_stale"][0] is None else np.subtract(c["delta_stale"], c["noise_floor"])
            for c in cells
        ]
        panels = (
            (axes[0], excess),
            (axes[1], [c["d_occ_lr"] for c in cells]),
            (axes[2], [c["after"] for c in cells]),
        )
        for ax, series in panels:
            kept = [(n, np.asarray(v, dtype=float)) for n, v in zip(ns, series) if v is not None]
            if not kept:
                continue
            x = [n for n, _ in kept]
            means = [float(v.mean()) for _, v in kept]
            stds = [float(v.std(ddof=1)) if v.size > 1 else 0.0 for _, v in kept]
            ax.errorbar(x, means, yerr=stds, marker="o", capsize=3, color=color, label=label)
    for ax, title in zip(
        axes, ("Delta_stale - floor / stage", "D_occ by ratios / stage", "held-out avg@4")
    ):
        ax.set_title(title)
        ax.set_xlabel("team size n")
        ax.set_xticks(ns)
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_xticks(ns, [str(n) for n in ns])
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="comparisons and reports")
    parser.add_argument("--ns", type=int, nargs="+", default=None, help="team sizes (2 3 4 6)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (0..7)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (n 2 3, seeds 0 1)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--json", type=Path, default=None, help="default OUT/lm_team_size.json")
    parser.add_argument("--plot", type=Path, default=None, help="default OUT/lm_team_size.png")
    args = parser.parse_args(argv)
    args.ns = args.ns or ([2, 3] if args.quick else [2, 3, 4, 6])
    args.seeds = args.seeds or ([0, 1] if args.quick else list(range(8)))
    if min(args.ns) < 2 or len(set(args.ns)) < 2:
        parser.error("--ns: give at least two distinct team sizes >= 2 (a fit needs two)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    runs = {n: run_n(n, args.seeds, args.out, args.quick) for n in args.ns}
    comparisons = {n: data for n, (data, _) in runs.items()}
    stages = runs[args.ns[0]][1]
    result = {
        "command": shlex.join(["benchmarks/lm_team_size.py", *(argv or sys.argv[1:])]),
        "task": "teamtr/Convention-v0",
        "config": str(CONFIG.relative_to(ROOT)),
        "overrides": [*NO_CLIP, *(QUICK if args.quick else ())],
        "ns": args.ns,
        "seeds": args.seeds,
        "stages": stages,
        "budget": {str(n): data["budget"] for n, data in comparisons.items()},
        "wall_s": time.perf_counter() - t0,  # this invocation (runs continued: their rest)
        "runs_wall_s": {  # the runs' seconds per n (the first run's includes behaviour cloning)
            str(n): float(sum(math.fsum(r["wall_s"]) for r in data["results"].values()))
            for n, data in comparisons.items()
        },
        **summarise(comparisons, stages, args.bootstrap),
    }
    table = markdown(result)
    print(table)
    out_json = args.json or args.out / "lm_team_size.json"
    out_png = args.plot or args.out / "lm_team_size.png"
    (args.out / "lm_team_size.md").write_text(table + "\n", encoding="utf-8")
    write_outputs(out_json, result, out_png, lambda p: plot(result, p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
