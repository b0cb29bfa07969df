"""The real-stack stale sweep: where do the library's own learners separate on the relay?

The twin of ``stale_sweep.py`` (which runs the exact, noise-free relay of trainers/exact/). Here
every run goes through the stack a user runs: ``TeamTrainer`` with a team of tabular agents
(``backend: tabular``), sampled batches, group advantages, the clipped surrogate and the
enforced trust region; only J after each stage is computed exactly (``eval/exact_J``). The
settings are those of ``benchmarks/configs/relay_tabular.yaml`` (the ``teamtr compare``
benchmark), except a cell's own:

* ``n``: team size (agents ``a1..an``, one round);
* ``delta``: the trust-region radius;
* ``clip``: ``optim.ratio_clip``, 0.2 (PPO's) or ``off`` (10: no clip in effect);
* ``beta``: ``adaptive`` (0.1, ``adapt_beta`` with its floor), ``fixed`` (0.1) or ``zero``.

In every cell TeamTR and naive sequential train from the same ``--inits`` run seeds (seed ``i``
draws every agent's table as ``teamtr train --set seed=i`` does). Per cell, paired over seeds
(TeamTR minus naive), with a seeded 95% percentile-bootstrap CI: the final-J ``margin`` and the
``auc_margin`` (mean of J after stages 1..S). Beside each cell: the exact sweep's margin at the
same n and delta (R = 1, its noise-free updates: 20 Adam steps at lr 0.05, beta 0, no clip).
``best`` is the cell whose margin has the largest lower CI bound.

Usage::

    .venv/bin/python benchmarks/stack_sweep.py [--quick] [--json OUT] [--plot PNG]
        [--ns 2 4 6] [--deltas 0.05 0.3 1.0] [--clips 0.2 off] [--betas adaptive fixed zero]
        [--inits 16] [--stages 6]

``--quick`` (under 2 minutes on 2 cores; what the slow test runs): n = 4, delta = 0.3, both
clips, beta zero, 6 seeds, 4 stages.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, write_outputs
from stale_sweep import mean_ci

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "benchmarks" / "configs" / "relay_tabular.yaml"
LEARNERS = ("teamtr", "naive_sequential")
CLIPS = {"0.2": 0.2, "off": 10.0}
BETAS = {
    "adaptive": ("trust_region.beta=0.1", "trust_region.adapt_beta=true"),
    "fixed": ("trust_region.beta=0.1", "trust_region.adapt_beta=false"),
    "zero": ("trust_region.beta=0.0", "trust_region.adapt_beta=false"),
}
FULL = {
    "ns": [2, 4, 6],
    "deltas": [0.05, 0.3, 1.0],
    "clips": ["0.2", "off"],
    "betas": ["adaptive", "fixed", "zero"],
    "inits": 16,
    "stages": 6,
}
QUICK = {
    "ns": [4],
    "deltas": [0.3],
    "clips": ["0.2", "off"],
    "betas": ["zero"],
    "inits": 6,
    "stages": 4,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 cells, 6 seeds (< 2 min)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--plot", type=Path, help="write the heat map (PNG) here")
    parser.add_argument("--ns", type=int, nargs="+", help=f"team sizes ({FULL['ns']})")
    parser.add_argument("--deltas", type=float, nargs="+", help=f"radii ({FULL['deltas']})")
    parser.add_argument("--clips", nargs="+", choices=list(CLIPS), help="ratio clips")
    parser.add_argument("--betas", nargs="+", choices=list(BETAS), help="beta settings")
    parser.add_argument("--inits", type=int, help=f"run seeds per cell ({FULL['inits']})")
    parser.add_argument("--stages", type=int, help=f"stages per run ({FULL['stages']})")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def cell_config(n: int, delta: float, clip: str, beta: str, stages: int, seed: int) -> Any:
    """The benchmark config with one cell's settings (and run seed ``seed``)."""
    from trainers.run.config_file import load_train_config

    agents = ",".join(f"a{i + 1}" for i in range(n))
    overrides = [
        f"task_options.agents=[{agents}]",
        f"trust_region.delta={delta}",
        f"optim.ratio_clip={CLIPS[clip]}",
        *BETAS[beta],
        f"schedule.stages={stages}",
        f"seed={seed}",
        "progress=false",
        "loggers=[]",
    ]
    return load_train_config(CONFIG, overrides)


def run_one(config: Any, learner: str) -> list[float]:
    """Exact J before training and after each stage of one run of ``learner``."""
    import dataclasses

    import teamtr_env
    from trainers.learners.team_trainer import TeamTrainer
    from trainers.run.team_eval import agent_sampling, build_policies, exact_team_reward

    config = dataclasses.replace(
        config, schedule=dataclasses.replace(config.schedule, learner=learner)
    )
    env_fn = functools.partial(teamtr_env.make, config.task, **config.task_options)
    env = env_fn()
    policies = build_policies(config, env, Path("unused"))  # tabular: no model directory
    sampling = agent_sampling(config, list(env.possible_agents))
    trainer = TeamTrainer(config, env_fn, policies)
    curve = [exact_team_reward(env, policies, sampling)]
    for _ in range(config.schedule.stages):
        trainer.run_stage()
        curve.append(exact_team_reward(env, policies, sampling))
    if any(j is None for j in curve):
        raise RuntimeError("the tabular relay team has no exact J: the config changed?")
    return [float(j) for j in curve if j is not None]


def exact_margin(n: int, delta: float, stages: int, inits: int) -> float:
    """The exact sweep's mean final-J margin at ``n``, ``delta`` (R = 1), its own settings."""
    import stale_sweep

    args = stale_sweep.parse_args(["--inits", str(inits), "--stages", str(stages)])
    cell: dict[str, Any] = stale_sweep.run_cell(args, n, delta, 1)  # noise-free: seconds
    return float(cell["margin"]["mean"])


def run_cell(args: argparse.Namespace, n: int, delta: float, clip: str, beta: str) -> dict:
    t0 = time.perf_counter()
    curves: dict[str, list[list[float]]] = {learner: [] for learner in LEARNERS}
    for seed in range(args.inits):
        config = cell_config(n, delta, clip, beta, args.stages, seed)
        for learner in LEARNERS:
            curves[learner].append(run_one(config, learner))
    a, b = (np.array(curves[learner]) for learner in LEARNERS)
    rng = np.random.default_rng([n, int(delta * 1000), len(clip), len(beta)])
    final = a[:, -1] - b[:, -1]
    auc = a[:, 1:].mean(axis=1) - b[:, 1:].mean(axis=1)
    return {
        "n": n,
        "delta": delta,
        "clip": clip,
        "beta": beta,
        "start_J": float(a[:, 0].mean()),
        "final_J": {"teamtr": float(a[:, -1].mean()), "naive": float(b[:, -1].mean())},
        "margin": mean_ci(final.tolist(), rng, args.bootstrap),
        "auc_margin": mean_ci(auc.tolist(), rng, args.bootstrap),
        "exact_sweep_margin": exact_margin(n, delta, args.stages, args.inits),
        "curves": {"teamtr": a.mean(axis=0).tolist(), "naive": b.mean(axis=0).tolist()},
        "seconds": time.perf_counter() - t0,
    }


def best_cell(grid: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The cell whose final-J margin has the largest lower CI bound (ties: larger mean)."""
    best = max(grid, key=lambda c: (c["margin"]["ci"][0], c["margin"]["mean"]))
    keys = ("n", "delta", "clip", "beta", "margin", "auc_margin", "final_J")
    return {k: best[k] for k in keys}


def fmt(x: dict[str, Any]) -> str:
    return f"{x['mean']:+.3f} [{x['ci'][0]:+.3f}, {x['ci'][1]:+.3f}]"


def report(result: dict[str, Any]) -> str:
    rows = [
        [
            c["n"],
            c["delta"],
            c["clip"],
            c["beta"],
            f"{c['final_J']['teamtr']:.3f}",
            f"{c['final_J']['naive']:.3f}",
            fmt(c["margin"]),
            fmt(c["auc_margin"]),
            f"{c['exact_sweep_margin']:+.3f}",
        ]
        for c in result["grid"]
    ]
    header = [
        "n", "delta", "clip", "beta", "TeamTR J", "naive J", "final-J margin [95% CI]",
        "AUC margin [95% CI]", "exact sweep margin",
    ]  # fmt: skip
    best = result["best"]
    return "\n".join(
        [
            markdown_table("The real-stack stale sweep (relay, tabular agents)", header, rows),
            "",
            f"best: n {best['n']}, delta {best['delta']}, clip {best['clip']}, beta "
            f"{best['beta']}: margin {fmt(best['margin'])}",
        ]
    )


def save_plot(result: dict[str, Any], path: Path) -> None:
    """One heat map of the final-J margin over n x delta per (clip, beta)."""
    from matplotlib.figure import Figure

    args = result["settings"]
    panels = [(c, b) for c in args["clips"] for b in args["betas"]]
    fig = Figure(figsize=(3.2 * len(args["betas"]), 2.8 * len(args["clips"])))
    axes = np.atleast_2d(fig.subplots(len(args["clips"]), len(args["betas"]), squeeze=False))
    cells = {(c["n"], c["delta"], c["clip"], c["beta"]): c for c in result["grid"]}
    for index, (clip, beta) in enumerate(panels):
        ax = axes[index // len(args["betas"]), index % len(args["betas"])]
        grid = np.array(
            [
                [cells[(n, d, clip, beta)]["margin"]["mean"] for d in args["deltas"]]
                for n in args["ns"]
            ]
        )
        image = ax.imshow(grid, cmap="RdBu", vmin=-0.2, vmax=0.2, aspect="auto")
        for i in range(len(args["ns"])):
            for j in range(len(args["deltas"])):
                ax.text(j, i, f"{grid[i, j]:+.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(args["deltas"])), [str(d) for d in args["deltas"]])
        ax.set_yticks(range(len(args["ns"])), [str(n) for n in args["ns"]])
        ax.set_xlabel("delta")
        ax.set_ylabel("n")
        ax.set_title(f"clip {clip}, beta {beta}", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle("final-J margin, TeamTR - naive (real stack, tabular relay)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_sweep(args: argparse.Namespace, progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    grid = []
    for clip in args.clips:
        for beta in args.betas:
            for n in args.ns:
                for delta in args.deltas:
                    cell = run_cell(args, n, delta, clip, beta)
                    grid.append(cell)
                    if progress:
                        print(
                            f"n {n} delta {delta} clip {clip} beta {beta}: margin "
                            f"{fmt(cell['margin'])} ({cell['seconds']:.0f} s)",
                            flush=True,
                        )
    settings = {
        key: getattr(args, key)
        for key in ("ns", "deltas", "clips", "betas", "inits", "stages", "bootstrap")
    }
    return {
        "grid": grid,
        "best": best_cell(grid),
        "settings": {**settings, "config": str(CONFIG.relative_to(ROOT)), "learners": LEARNERS},
        "seconds": time.perf_counter() - t0,
        "command": " ".join(shlex.quote(a) for a in sys.argv),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(1)  # tables are tiny: threads only add overhead
    result = run_sweep(args)
    print(report(result))
    print(f"{len(result['grid'])} cells in {result['seconds']:.0f} s")
    write_outputs(args.json, result, args.plot, functools.partial(save_plot, result))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
