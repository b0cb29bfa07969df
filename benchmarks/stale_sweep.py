"""The stale-stress sweep: where does TeamTR's resampling beat naive sequential training on the
exact relay (trainers/exact/; docs/exact-games.md)?

A *cell* is one (team size n, trust-region radius delta, rounds R). In every cell, TeamTR and naive
sequential run ``--stages`` noise-free stages of the relay ``RelayGame(n, K, R)`` from the same
``--inits`` random initialisations (the same logits: ``random_logits`` seeded by
``[seed, n, i]``, as ``exact_team.py`` does, so every cell of one n shares its teams) at an equal
budget: one ``ExactSettings`` for both (same Adam steps, lr, beta, delta; only ``delta`` varies
over the grid). Per cell, paired over initialisations (TeamTR minus naive):

* ``margin``: the difference in final J (after the last stage);
* ``auc_margin``: the difference in the area under the J curve, taken as the mean of J after
  each stage ``1..S`` (the initial J is the same for both learners, so it would add nothing);

each with a seeded 95% percentile-bootstrap CI over initialisations. ``best`` is the cell whose
final-J margin has the largest lower CI bound.

Usage::

    .venv/bin/python benchmarks/stale_sweep.py [--quick] [--json OUT] [--plot PNG]
        [--ns 2 3 4 6 8] [--deltas 0.01 0.05 0.1 0.3 1.0] [--rounds 1 2 3]
        [--inits 16] [--stages 6] [--seed 0] [--steps 20] [--lr 0.05] ...

``--quick`` (under 2 minutes on 2 cores; what the slow test runs) is a reduced grid with fewer
initialisations and stages.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, mean_ci_bounds, write_outputs

from trainers.exact.games import RelayGame, random_logits
from trainers.exact.stages import METHODS, ExactSettings, run_exact

SHORT = {"teamtr": "teamtr", "naive_sequential": "naive"}
FULL = {
    "ns": [2, 3, 4, 6, 8],
    "deltas": [0.01, 0.05, 0.1, 0.3, 1.0],
    "rounds": [1, 2, 3],
    "inits": 16,
    "stages": 6,
    "bootstrap": 2000,
}
QUICK = {
    "ns": [2, 4, 8],
    "deltas": [0.05, 0.3, 1.0],
    "rounds": [1, 3],
    "inits": 8,
    "stages": 4,
    "bootstrap": 1000,
}
AUC = "mean over stages 1..S of J after the stage"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a reduced grid (< 2 min on 2 cores), for tests"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--plot", type=Path, help="write the heat map (PNG) here")
    parser.add_argument("--ns", type=int, nargs="+", help=f"team sizes ({FULL['ns']})")
    parser.add_argument("--deltas", type=float, nargs="+", help=f"radii ({FULL['deltas']})")
    parser.add_argument("--rounds", type=int, nargs="+", help=f"rounds R ({FULL['rounds']})")
    parser.add_argument("--inits", type=int, help=f"initialisations per cell ({FULL['inits']})")
    parser.add_argument("--stages", type=int, help=f"stages per run ({FULL['stages']})")
    parser.add_argument("--bootstrap", type=int, help=f"resamples ({FULL['bootstrap']})")
    parser.add_argument("--seed", type=int, default=0, help="initialisations and bootstrap")
    parser.add_argument("--symbols", type=int, default=4, help="K")
    parser.add_argument("--code", type=float, default=6.0, help="init: permutation-code strength")
    parser.add_argument("--noise", type=float, default=1.0, help="init: Gaussian logit scale")
    parser.add_argument("--steps", type=int, default=20, help="Adam steps per agent update")
    parser.add_argument("--lr", type=float, default=0.05, help="Adam learning rate (logits)")
    parser.add_argument("--beta", type=float, default=0.0, help="KL penalty coefficient")
    parser.add_argument(
        "--ratio-clip", type=float, default=None, help="clip the surrogate (default: unclipped)"
    )
    parser.add_argument(
        "--threshold", type=float, default=0.05, help="list cells whose mean margin is >= this"
    )
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    errors = []
    if any(n < 2 for n in args.ns):
        errors.append(
            f"--ns: every team size must be >= 2 (a stale context needs a predecessor), got {args.ns}"
        )
    if any(not (math.isfinite(d) and d > 0) for d in args.deltas):
        errors.append(f"--deltas: every radius must be a finite number > 0, got {args.deltas}")
    if any(r < 1 for r in args.rounds):
        errors.append(f"--rounds: every R must be >= 1, got {args.rounds}")
    if args.inits < 2:
        errors.append(
            f"--inits must be >= 2 (a bootstrap CI needs 2 initialisations), got {args.inits}"
        )
    if args.stages < 1:
        errors.append(f"--stages must be >= 1, got {args.stages}")
    if args.bootstrap < 1:
        errors.append(f"--bootstrap must be >= 1, got {args.bootstrap}")
    if args.symbols < 2:
        errors.append(f"--symbols must be >= 2, got {args.symbols}")
    if not (args.code >= 0 and args.noise >= 0):
        errors.append(f"--code and --noise must be >= 0, got {args.code}, {args.noise}")
    if errors:
        parser.error("; ".join(errors))
    try:
        settings_for(args, args.deltas[0])  # steps, lr, beta, ratio_clip: ExactSettings' checks
    except ValueError as exc:
        parser.error(str(exc))
    args.ns = sorted(set(args.ns))
    args.deltas = sorted(set(args.deltas))
    args.rounds = sorted(set(args.rounds))
    return args


def settings_for(args: argparse.Namespace, delta: float) -> ExactSettings:
    """The one update rule both learners use in a cell; only ``delta`` varies over the grid."""
    return ExactSettings(
        steps=args.steps, lr=args.lr, delta=delta, beta=args.beta, ratio_clip=args.ratio_clip
    )


def cell_rng(seed: int, n: int, delta: float, rounds: int) -> np.random.Generator:
    """The bootstrap generator of a cell: seeded by the cell itself, so a cell's CI does not depend
    on which other cells run or in which order."""
    return np.random.default_rng([seed, 17, n, rounds, round(delta * 1e9)])


def mean_ci(values: Sequence[float], rng: np.random.Generator, resamples: int) -> dict[str, Any]:
    """Mean and the 95% percentile-bootstrap CI over ``values``."""
    lo, hi = mean_ci_bounds(values, rng, resamples)
    return {"mean": float(np.mean(values)), "ci": [lo, hi]}


# -- one cell -------------------------------------------------------------------------------------
def run_cell(args: argparse.Namespace, n: int, delta: float, rounds: int) -> dict[str, Any]:
    """Both learners from the same initialisations at one (n, delta, R).

    Returns the cell's JSON entry plus ``per_init`` (not written to the JSON): per learner
    (``teamtr``, ``naive``) and initialisation the J curve ``[J_0, J_1, ..., J_S]`` and the true
    improvement of the first update of the first stage (the same for both learners: both
    optimise the same surrogate under the same stage-start team).
    """
    t0 = time.perf_counter()
    game = RelayGame(n, args.symbols, rounds)
    settings = settings_for(args, delta)
    curves: dict[str, list[list[float]]] = {SHORT[m]: [] for m in METHODS}
    first: dict[str, list[float]] = {SHORT[m]: [] for m in METHODS}
    updates: dict[str, list[Any]] = {SHORT[m]: [] for m in METHODS}
    for i in range(args.inits):
        logits = random_logits(
            game, np.random.default_rng([args.seed, n, i]), args.noise, args.code
        )
        for method in METHODS:
            _, run = run_exact(game, logits, method, settings, args.stages)
            curves[SHORT[method]].append([run[0].j_before, *(s.j_after for s in run)])
            first[SHORT[method]].append(run[0].updates[0].improvement)
            updates[SHORT[method]] += [u for s in run for u in s.updates]
    tr, nv = np.asarray(curves["teamtr"]), np.asarray(curves["naive"])
    rng = cell_rng(args.seed, n, delta, rounds)
    entry: dict[str, Any] = {
        "n": n,
        "delta": delta,
        "rounds": rounds,
        "margin": mean_ci(tr[:, -1] - nv[:, -1], rng, args.bootstrap),
        "auc_margin": mean_ci(tr[:, 1:].mean(axis=1) - nv[:, 1:].mean(axis=1), rng, args.bootstrap),
        "j_final": {"teamtr": float(tr[:, -1].mean()), "naive": float(nv[:, -1].mean())},
        "j_init": float(tr[:, 0].mean()),
        "j_curve": {"teamtr": tr.mean(axis=0).tolist(), "naive": nv.mean(axis=0).tolist()},
        "trust_region": {
            m: {
                "binding_rate": float(np.mean([u.backtracks > 0 or not u.accepted for u in us])),
                "reverted_rate": float(np.mean([not u.accepted for u in us])),
                "kl_tok_over_delta": float(np.mean([u.kl_tok for u in us]) / delta),
                "out_of_region_rate": float(np.mean([not u.in_region for u in us])),
            }
            for m, us in updates.items()
        },
        "paired_start": {
            "j_init_max_abs_diff": float(np.abs(tr[:, 0] - nv[:, 0]).max()),
            "first_update_max_abs_diff": float(
                np.abs(np.subtract(first["teamtr"], first["naive"])).max()
            ),
        },
        "inits": args.inits,
        "seconds": time.perf_counter() - t0,
        "per_init": {"curves": curves, "first_update": first},
    }
    return entry


def best_cell(grid: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The cell with the largest lower CI bound of the final-J margin (ties: the larger mean)."""
    if not grid:
        raise ValueError("no cells")
    top = max(grid, key=lambda c: (c["margin"]["ci"][0], c["margin"]["mean"]))
    return {
        "n": top["n"],
        "delta": top["delta"],
        "rounds": top["rounds"],
        "margin": top["margin"],
        "auc_margin": top["auc_margin"],
        "j_final": top["j_final"],
    }


def excludes_zero(ci: Sequence[float]) -> bool:
    return ci[0] > 0 or ci[1] < 0


# -- report ---------------------------------------------------------------------------------------
def fmt_ci(x: dict[str, Any], digits: int = 3) -> str:
    return f"{x['mean']:+.{digits}f} [{x['ci'][0]:+.{digits}f}, {x['ci'][1]:+.{digits}f}]"


def cell_rows(cells: Sequence[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            c["rounds"],
            c["n"],
            c["delta"],
            f"{c['j_init']:.3f}",
            f"{c['j_final']['teamtr']:.3f}",
            f"{c['j_final']['naive']:.3f}",
            fmt_ci(c["margin"]),
            fmt_ci(c["auc_margin"]),
            f"{c['trust_region']['teamtr']['binding_rate']:.2f} / "
            f"{c['trust_region']['naive']['binding_rate']:.2f}",
            f"{c['seconds']:.1f}",
        ]
        for c in cells
    ]


CELL_HEADER = [
    "R",
    "n",
    "delta",
    "J init",
    "TeamTR final J",
    "naive final J",
    "final-J margin [95% CI]",
    "AUC margin [95% CI]",
    "TR binding (TeamTR / naive)",
    "s",
]


def report(result: dict[str, Any]) -> str:
    grid, s = result["grid"], result["settings"]
    parts = []
    for r in s["rounds"]:
        cells = {(c["n"], c["delta"]): c for c in grid if c["rounds"] == r}
        rows = [
            [n]
            + [
                fmt_ci(cells[n, d]["margin"])
                + ("*" if excludes_zero(cells[n, d]["margin"]["ci"]) else "")
                for d in s["deltas"]
            ]
            for n in s["ns"]
        ]
        parts.append(
            markdown_table(
                f"Final-J margin, TeamTR - naive (R = {r}; rows n, columns delta; * = CI excludes 0)",
                ["n \\ delta", *s["deltas"]],
                rows,
            )
        )
    parts.append(
        markdown_table(
            f"Every cell ({s['inits']} inits, {s['stages']} stages; AUC = {AUC}; "
            "TR binding = share of updates the trust-region line search shortened or reverted)",
            CELL_HEADER,
            cell_rows(grid),
        )
    )
    above = [c for c in grid if c["margin"]["mean"] >= s["threshold"]]
    if above:
        parts.append(
            markdown_table(
                f"Cells with a mean final-J margin >= {s['threshold']}",
                CELL_HEADER,
                cell_rows(above),
            )
        )
    else:
        parts.append(f"No cell has a mean final-J margin >= {s['threshold']}.")
    b = result["best"]
    parts.append(
        f"best cell (largest lower CI bound of the final-J margin): n = {b['n']}, "
        f"delta = {b['delta']}, R = {b['rounds']}: margin {fmt_ci(b['margin'], 4)}, "
        f"AUC margin {fmt_ci(b['auc_margin'], 4)}"
    )
    return "\n\n".join(parts)


def save_plot(result: dict[str, Any], path: Path) -> None:
    """One heat-map panel per R: n (rows) x delta (columns), colour = mean final-J margin, each
    cell annotated with its value (bold with a * when its 95% CI excludes 0)."""
    from matplotlib.figure import Figure  # no pyplot: Agg canvas, no display, no global state

    grid, s = result["grid"], result["settings"]
    ns, deltas, rounds = s["ns"], s["deltas"], s["rounds"]
    cells = {(c["rounds"], c["n"], c["delta"]): c for c in grid}
    vmax = max(abs(c["margin"]["mean"]) for c in grid) or 1e-3
    fig = Figure(
        figsize=(0.75 * len(deltas) * len(rounds) + 1.6, 0.45 * len(ns) + 1.6), layout="constrained"
    )
    axes = fig.subplots(1, len(rounds), squeeze=False, sharey=True)[0]
    image = None
    for ax, r in zip(axes, rounds):
        values = np.array([[cells[r, n, d]["margin"]["mean"] for d in deltas] for n in ns])
        image = ax.imshow(values, cmap="RdBu", vmin=-vmax, vmax=vmax, aspect="auto", origin="lower")
        for i, n in enumerate(ns):
            for j, d in enumerate(deltas):
                m = cells[r, n, d]["margin"]
                sig = excludes_zero(m["ci"])
                dark = abs(m["mean"]) > 0.6 * vmax
                ax.text(
                    j,
                    i,
                    f"{m['mean']:+.3f}" + ("*" if sig else ""),
                    ha="center",
                    va="center",
                    fontsize=7,
                    fontweight="bold" if sig else "normal",
                    color="white" if dark else "black",
                )
        ax.set_xticks(range(len(deltas)))
        ax.set_xticklabels([f"{d:g}" for d in deltas])
        ax.set_yticks(range(len(ns)))
        ax.set_yticklabels([str(n) for n in ns])
        ax.set_xlabel("trust-region radius delta")
        ax.set_title(f"R = {r}")
    fig.suptitle(
        f"final J, TeamTR - naive (paired mean over {s['inits']} inits, {s['stages']} stages); "
        "* = 95% CI excludes 0",
        fontsize=9,
    )
    axes[0].set_ylabel("team size n")
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.9, label="final-J margin")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


# -- main -----------------------------------------------------------------------------------------
def run_sweep(args: argparse.Namespace, progress: bool = True) -> dict[str, Any]:
    """Every cell of the grid (R, then delta, then n) and the summary; ``per_init`` is kept in
    the returned cells (``main`` drops it from the JSON)."""
    cells = [(n, d, r) for r in args.rounds for d in args.deltas for n in args.ns]
    t0 = time.perf_counter()
    grid = []
    for i, (n, d, r) in enumerate(cells, 1):
        cell = run_cell(args, n, d, r)
        grid.append(cell)
        if progress:
            print(
                f"[{i:{len(str(len(cells)))}d}/{len(cells)}] R={r} delta={d:g} n={n}: "
                f"margin {fmt_ci(cell['margin'])}, AUC {fmt_ci(cell['auc_margin'])} "
                f"({cell['seconds']:.1f} s, {time.perf_counter() - t0:.0f} s total)",
                file=sys.stderr,
                flush=True,
            )
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings.update(
        max_backtracks=ExactSettings().max_backtracks,
        methods=list(METHODS),
        margin="paired over initialisations: TeamTR - naive, J after the last stage",
        auc=AUC,
        ci="95% percentile bootstrap over initialisations, seeded per cell",
        init="random_logits(RelayGame(n, K, R), default_rng([seed, n, i]), noise, code)",
    )
    return {
        "grid": grid,
        "best": best_cell(grid),
        "above_threshold": [
            {"n": c["n"], "delta": c["delta"], "rounds": c["rounds"], "margin": c["margin"]}
            for c in grid
            if c["margin"]["mean"] >= args.threshold
        ],
        "settings": settings,
        "seconds": time.perf_counter() - t0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    result = run_sweep(args)
    result["command"] = shlex.join(["python", "benchmarks/stale_sweep.py", *argv])
    result["load_average_1min_at_start"] = load
    print(report(result))
    print(f"\n{len(result['grid'])} cells in {result['seconds']:.1f} s")
    out = {
        **result,
        "grid": [{k: v for k, v in c.items() if k != "per_init"} for c in result["grid"]],
    }
    write_outputs(args.json, out, args.plot, functools.partial(save_plot, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
