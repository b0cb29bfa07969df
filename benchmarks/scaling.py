"""Team-size study (paper App. G.1): how Delta_stale and D_occ grow with the number of agents n,
for naive sequential and TeamTR, exactly and through the real trainer.

* **Exact** (``trainers/exact/``): the n-agent relay from random initialisations (the
  ones ``benchmarks/exact_team.py`` uses), noise-free stages. Per stage
  ``Delta_stale = sum_i |L_i^stale - L_i^seq|``, the updated agent's exact surrogate under the
  stage-start team vs under the intermediate team ``pi_hat^{i-1}``
  (``trainers.exact.games.surrogate`` on those two base teams), and
  ``D_occ = sum_i TV(d^{pi_hat^{i-1}}, d^{pi_hat^0})`` over ``(turn, secret, symbol)``.
* **Sampled** (``trainers/exact/run.py``): the same game on ``teamtr/Relay-v0`` with
  ``TabularPolicy`` agents, trained by ``TeamTrainer.run_stage()`` with diagnostics on. Read from
  ``StageReport.metrics``: ``stage/delta_stale`` and ``stage/delta_stale_noise_floor`` (rescaled
  to J units by ``R / (1 - 1/G)``, docs/exact-games.md), and ``diag/d_occ`` and
  ``diag/d_occ_noise_floor`` where the trainer reports them (``None`` otherwise). Every sampled
  stage is also measured exactly: the exact Delta_stale and D_occ of the updates it made (D_occ
  over ``(turn, observed symbol)``, ``trainers.exact.games.context_occupancy_tv``, the states the
  trainer's ``occupancy: task`` featurisation sees).

* **The coordination task** (``--pipeline-ns``; the full study's default 2 3 4 5 6 8, none with
  ``--quick``): the demo's tiny language models on an n-step ``teamtr/Pipeline-v0`` through
  ``run_training`` with ``diagnostics: full`` (the stale gap and D_occ over hashed contexts, each
  with its noise floor), every seed from one behaviour clone (``sft.seed``);
  ``--pipeline-start P`` gives every n an expert that gets whole chains right with probability
  P. Fitted over seeds.

Fits ``x ~ n^alpha`` (``trainers.diagnostics.estimators.loglog_fit`` of the per-n means, 95% bootstrap CI
over initialisations) for each method; sampled quantities are fitted on their excess over the
noise floor, and an n whose mean excess is not positive is dropped and named.

Usage::

    .venv/bin/python benchmarks/scaling.py --json OUT [--quick] [--plot PNG] [--ns 2 3 4 5 6 8]
        [--inits 30] [--sampled-ns ...] [--sampled-inits 4] [--sampled-stages 2] ...
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, power_fit
from exact_team import SHORT, mean_ci

from trainers.config import TrainConfig
from trainers.exact.games import RelayGame, context_occupancy_tv, random_logits, surrogate
from trainers.exact.run import (
    agent_names,
    relay_env_fn,
    relay_policies,
    sampled_config,
    team_tables,
)
from trainers.exact.stages import ExactSettings, run_exact
from trainers.learners.callbacks import OnUpdate
from trainers.learners.team_trainer import TeamTrainer

QUANTITIES = ("delta_stale", "d_occ")
LABELS = {"delta_stale": "Delta_stale", "d_occ": "D_occ"}
# the trainer's keys: (measured, noise floor)
METRIC_KEYS = {
    "delta_stale": ("stage/delta_stale", "stage/delta_stale_noise_floor"),
    "d_occ": ("diag/d_occ", "diag/d_occ_noise_floor"),
}
METHODS = ("naive", "teamtr")  # table order
FULL_DIAGNOSTICS: dict[str, Any] = {"level": "full", "occupancy": "task"}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run (minutes), for tests")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--plot", type=Path, help="save the log-log plot here (PNG)")
    parser.add_argument("--ns", type=int, nargs="+", default=None, help="([2, 3, 4, 5, 6, 8])")
    parser.add_argument("--rounds", type=int, default=1, help="R: turns per agent per episode")
    parser.add_argument("--symbols", type=int, default=4, help="K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=None, help="resamples (1000)")
    exact = parser.add_argument_group("exact study")
    exact.add_argument("--inits", type=int, default=None, help="initialisations per n (30)")
    exact.add_argument(
        "--stages",
        type=int,
        default=1,
        help="stages per run, averaged (1: from the random init, the point every n shares)",
    )
    exact.add_argument("--code", type=float, default=6.0, help="init: permutation-code strength")
    exact.add_argument("--noise", type=float, default=1.0, help="init: Gaussian logit scale")
    exact.add_argument("--delta", type=float, default=0.01)
    exact.add_argument("--steps", type=int, default=20)
    exact.add_argument("--lr", type=float, default=0.05)
    sampled = parser.add_argument_group("sampled study (TeamTrainer on teamtr/Relay-v0)")
    sampled.add_argument("--sampled-ns", type=int, nargs="*", default=None, help="(--ns)")
    sampled.add_argument("--sampled-inits", type=int, default=None, help="(4)")
    sampled.add_argument("--sampled-stages", type=int, default=None, help="(2)")
    sampled.add_argument("--sampled-problems", type=int, default=None, help="B (32)")
    sampled.add_argument("--sampled-group", type=int, default=None, help="G (16)")
    sampled.add_argument("--sampled-delta", type=float, default=0.1)
    sampled.add_argument("--sampled-code", type=float, default=3.0, help="init code strength")
    sampled.add_argument("--sampled-lr", type=float, default=0.5)
    sampled.add_argument("--sampled-epochs", type=int, default=8)
    text = parser.add_argument_group(
        "the coordination task (tiny language models on teamtr/Pipeline-v0, the demo's task)"
    )
    text.add_argument(
        "--pipeline-ns",
        type=int,
        nargs="*",
        default=None,
        help="team sizes of the text study; none skips it (full: 2 3 4 5 6 8; --quick: none)",
    )
    text.add_argument("--pipeline-seeds", type=int, nargs="+", default=[0, 1])
    text.add_argument("--pipeline-stages", type=int, default=2)
    text.add_argument("--pipeline-problems", type=int, default=32, help="B")
    text.add_argument("--pipeline-sft-steps", type=int, default=600, help="behaviour cloning")
    text.add_argument(
        "--pipeline-start",
        type=float,
        default=None,
        help="aim every n's cloned start at this team accuracy: the expert errs at a per-step "
        "rate 1 - P^(1/n), so all n steps are right with probability P (default: the demo's "
        "rate 0.4 at every n, whose start falls like 0.6^n)",
    )
    text.add_argument("--pipeline-out", type=Path, default=Path("runs/scaling-pipeline"))
    text.add_argument("--reuse", action="store_true", help="reuse finished pipeline runs")
    args = parser.parse_args(argv)
    quick = {
        "ns": [2, 3, 4, 6],
        "inits": 8,
        "bootstrap": 200,
        "sampled_ns": [2, 4],
        "sampled_inits": 2,
        "sampled_stages": 1,
        "sampled_problems": 8,
        "sampled_group": 8,
        "pipeline_ns": [],
    }
    full = {
        "ns": [2, 3, 4, 5, 6, 8],
        "inits": 30,
        "bootstrap": 1000,
        "sampled_ns": None,
        "sampled_inits": 4,
        "sampled_stages": 2,
        "sampled_problems": 32,
        "sampled_group": 16,
        "pipeline_ns": [2, 3, 4, 5, 6, 8],
    }
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.sampled_ns is None:
        args.sampled_ns = list(args.ns)
    problems = []
    if args.pipeline_start is not None and not 0 < args.pipeline_start < 1:
        problems.append(f"--pipeline-start must be in (0, 1), got {args.pipeline_start}")
    if args.pipeline_ns and not all(1 <= n <= 8 for n in args.pipeline_ns):
        problems.append(f"--pipeline-ns: a chain has 1..8 steps, got {args.pipeline_ns}")
    for flag, ns in (
        ("--ns", args.ns),
        ("--sampled-ns", args.sampled_ns),
        ("--pipeline-ns", args.pipeline_ns),
    ):
        if ns and (len(set(ns)) < 2 or min(ns) < 2):
            problems.append(f"{flag} needs at least 2 distinct n >= 2 for a fit, got {ns}")
    for flag in ("inits", "stages", "sampled_inits", "sampled_stages", "rounds"):
        if getattr(args, flag) < 1:
            problems.append(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    if args.sampled_group < 2:
        problems.append(
            f"--sampled-group must be >= 2 (centred advantages), got {args.sampled_group}"
        )
    if problems:
        parser.error("; ".join(problems))
    return args


# -- exact --------------------------------------------------------------------------------------
def exact_runs(args: argparse.Namespace) -> dict[str, dict[str, dict[int, list[float]]]]:
    """Per method, quantity and n: one value per initialisation (the mean over its stages)."""
    settings = ExactSettings(steps=args.steps, lr=args.lr, delta=args.delta)
    out: dict[str, dict[str, dict[int, list[float]]]] = {
        m: {q: {n: [] for n in args.ns} for q in QUANTITIES} for m in SHORT.values()
    }
    for n in args.ns:
        game = RelayGame(n, args.symbols, args.rounds)
        for i in range(args.inits):
            init_rng = np.random.default_rng([args.seed, n, i])
            logits = random_logits(game, init_rng, args.noise, args.code)
            for method, short in SHORT.items():
                _, run = run_exact(game, logits, method, settings, args.stages)
                for q in QUANTITIES:
                    out[short][q][n].append(float(np.mean([getattr(s, q) for s in run])))
    return out


def exact_study(args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    runs = exact_runs(args)
    out: dict[str, Any] = {}
    for method, by_q in runs.items():
        out[method] = {
            "per_n": {
                str(n): {q: mean_ci(by_q[q][n], rng, args.bootstrap) for q in QUANTITIES}
                for n in args.ns
            },
            "fits": {q: power_fit(by_q[q], rng, args.bootstrap) for q in QUANTITIES},
        }
    return out


# -- sampled ------------------------------------------------------------------------------------
def relay_config(args: argparse.Namespace, method: str, seed: int, diagnostics: Any) -> TrainConfig:
    return sampled_config(
        method,  # type: ignore[arg-type]
        seed=seed,
        diagnostics=diagnostics,
        schedule={"problems_per_batch": args.sampled_problems, "group_size": args.sampled_group},
        trust_region={"delta": args.sampled_delta, "beta": 0.0},
        optim={"lr": args.sampled_lr, "epochs": args.sampled_epochs},
    )


def _metric(metrics: dict[str, float], key: str, scale: float) -> float | None:
    return None if key not in metrics else float(metrics[key]) * scale


def sampled_run(
    game: RelayGame, logits: Sequence[np.ndarray], config: TrainConfig, stages: int
) -> list[dict[str, float | None]]:
    """``stages`` stages through :class:`TeamTrainer`; per stage the trainer's measured values
    and noise floors (``None`` where it does not report them) and the exact values of the
    updates it made."""
    policies = relay_policies(game, logits, seed=config.seed)
    trainer = TeamTrainer(config, relay_env_fn(game), policies)
    names = agent_names(game)
    # The trainer's surrogate is a mean over the agent's messages of centred rewards: x R/(1-1/G)
    # puts Delta_stale in J units (docs/exact-games.md, sampled mode). TV needs no scale.
    scales = {"delta_stale": game.rounds / (1.0 - 1.0 / config.schedule.group_size), "d_occ": 1.0}
    out = []
    for _ in range(stages):
        teams = [team_tables(game, policies)]

        def snapshot(record: Any, into: list[list[np.ndarray]] = teams) -> None:
            into.append(team_tables(game, policies))

        watch = OnUpdate(snapshot)
        trainer.callbacks.append(watch)
        report = trainer.run_stage()
        trainer.callbacks.remove(watch)
        start = teams[0]
        exact_gap = 0.0
        for u, before, after in zip(report.updates, teams[:-1], teams[1:]):
            k = names.index(u.agent)
            exact_gap += abs(
                surrogate(game, start, k, after[k]) - surrogate(game, before, k, after[k])
            )
        row: dict[str, float | None] = {
            "exact_delta_stale": exact_gap,
            # over (turn, observed symbol): the states diagnostics.occupancy "task" featurises
            "exact_d_occ": sum(context_occupancy_tv(game, t, start) for t in teams[1:-1]),
        }
        for q, (key, floor_key) in METRIC_KEYS.items():
            row[q] = _metric(report.metrics, key, scales[q])
            row[f"{q}_floor"] = _metric(report.metrics, floor_key, scales[q])
        out.append(row)
    return out


def _run_means(stages: list[dict[str, float | None]]) -> dict[str, float | None]:
    keys = stages[0].keys()
    return {
        k: None if any(s[k] is None for s in stages) else float(np.mean([s[k] for s in stages]))  # type: ignore[misc]
        for k in keys
    }


def sampled_study(args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    diagnostics = dict(FULL_DIAGNOSTICS)  # D_occ over the relay's exact states
    runs: dict[str, dict[int, list[dict[str, float | None]]]] = {
        m: {n: [] for n in args.sampled_ns} for m in SHORT.values()
    }
    for n in args.sampled_ns:
        game = RelayGame(n, args.symbols, args.rounds)
        for i in range(args.sampled_inits):
            init_rng = np.random.default_rng([args.seed, n, i, 1])
            logits = random_logits(game, init_rng, args.noise, args.sampled_code)
            for method, short in SHORT.items():
                cfg = relay_config(args, method, args.seed + i, diagnostics)
                runs[short][n].append(
                    _run_means(sampled_run(game, logits, cfg, args.sampled_stages))
                )
    out: dict[str, Any] = {"diagnostics": diagnostics}
    for method, by_n in runs.items():
        out[method] = summarise_sampled(by_n, rng, args.bootstrap)
    return out


def summarise_sampled(
    by_n: dict[int, list[dict[str, float | None]]], rng: np.random.Generator, resamples: int
) -> dict[str, Any]:
    """Per n: mean [CI] of the measured value, its noise floor, the excess (measured - floor)
    and the exact value of the same updates; fits of each (``None`` where not reported)."""

    def series(q: str, suffix: str = "") -> dict[int, list[float]] | None:
        values = {n: [r[q + suffix] for r in rs] for n, rs in by_n.items()}
        if any(v is None for vs in values.values() for v in vs):
            return None
        return values  # type: ignore[return-value]

    per_n: dict[str, dict[str, Any]] = {str(n): {} for n in by_n}
    fits: dict[str, Any] = {}
    for q in QUANTITIES:
        measured, floor, exact = series(q), series(q, "_floor"), series(f"exact_{q}")
        assert exact is not None
        for n in by_n:
            row = per_n[str(n)]
            row[f"exact_{q}"] = mean_ci(exact[n], rng, resamples)
            row[q] = None if measured is None else mean_ci(measured[n], rng, resamples)
            row[f"{q}_floor"] = None if floor is None else mean_ci(floor[n], rng, resamples)
            row[f"{q}_excess"] = (
                None
                if measured is None or floor is None
                else mean_ci(np.subtract(measured[n], floor[n]), rng, resamples)
            )
        fits[f"exact_{q}"] = power_fit(exact, rng, resamples)
        fits[q] = None if measured is None else power_fit(measured, rng, resamples)
        fits[f"{q}_floor"] = None if floor is None else power_fit(floor, rng, resamples)
        fits[f"{q}_excess"] = (
            None
            if measured is None or floor is None
            else power_fit(measured, rng, resamples, floor)
        )
    return {"per_n": per_n, "fits": fits}


# -- the coordination task (tiny language models) -------------------------------------------------
def team_overrides(agents: int) -> list[str]:
    """``--set`` lines for an ``agents``-step pipeline with agents step1..stepN (no system
    prompts): the demo's task at another team size."""
    from trainers.config import DEMO_TASK_OPTIONS

    names = [f"step{i + 1}" for i in range(agents)]
    options = {
        **DEMO_TASK_OPTIONS,
        "steps": agents,
        "agents": names,
        "system_prompts": {a: "" for a in names},
    }
    return [f"task_options={json.dumps(options)}"]


def expert_error_rate(start: float, n: int) -> float:
    """The per-step error rate whose n-step chains are all right with probability ``start``."""
    return 1.0 - start ** (1.0 / n)


def pipeline_run(args: argparse.Namespace, n: int, method: str, seed: int) -> dict[str, Any]:
    """One training run of the demo's configuration on an ``n``-step pipeline (agents
    step1..stepN, each sees only the previous message) with ``diagnostics: full``: the per-stage
    means of the stale gap, D_occ (hashed contexts) and their noise floors, and held-out avg@K
    before and after. Behaviour cloning is shared by the methods of a seed (``sft.cache_dir``)."""
    from rich.console import Console

    from trainers.run.config_file import config_from_overrides
    from trainers.run.logger import read_jsonl
    from trainers.run.recipe import run_training

    out = args.pipeline_out
    run_dir = out / f"n{n}-{method}-seed{seed}"
    config = config_from_overrides(
        [
            *team_overrides(n),
            f"schedule.learner={method}",
            f"schedule.stages={args.pipeline_stages}",
            f"schedule.problems_per_batch={args.pipeline_problems}",
            f"sft.steps={args.pipeline_sft_steps}",
            *(
                []
                if args.pipeline_start is None
                else [f"sft.expert_error_rate={expert_error_rate(args.pipeline_start, n)}"]
            ),
            f"sft.cache_dir={out / 'bc-cache'}",
            "eval.problems=100",
            "eval.k=2",
            "eval.train_distribution=false",
            "diagnostics=full",
            f"seed={seed}",
            f"run_dir={run_dir}",
            "progress=false",
        ]
    )
    if not (args.reuse and (run_dir / "summary.json").exists()):
        t0 = time.perf_counter()
        run_training(config, console=Console(file=io.StringIO()), overwrite=True)
        print(f"pipeline n={n} {method} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    stages = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "stage/wall_s" in r]
    row: dict[str, Any] = {
        "avg_before": summary["before"].get("eval/avg@2"),
        "avg_after": summary["after"].get("eval/avg@2"),
    }
    for q, (key, floor_key) in METRIC_KEYS.items():
        for name, k in ((q, key), (f"{q}_floor", floor_key)):
            values = [r[k] for r in stages if k in r]
            row[name] = float(np.mean(values)) if len(values) == len(stages) else None
    return row


def pipeline_study(args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any] | None:
    """The text study: per n and method, the mean over seeds of the per-stage means."""
    if not args.pipeline_ns:
        return None
    by_method: dict[str, dict[int, list[dict[str, Any]]]] = {m: {} for m in SHORT.values()}
    for n in args.pipeline_ns:
        for seed in args.pipeline_seeds:
            for method, short in SHORT.items():
                by_method[short].setdefault(n, []).append(pipeline_run(args, n, method, seed))
    out: dict[str, Any] = {}
    for short, by_n in by_method.items():
        per_n: dict[str, dict[str, Any]] = {}
        fits: dict[str, Any] = {}
        for n, rows in by_n.items():
            per_n[str(n)] = {
                key: None
                if any(r[key] is None for r in rows)
                else mean_ci([r[key] for r in rows], rng, args.bootstrap)
                for key in rows[0]
            }
            for q in QUANTITIES:
                measured, floor = [r[q] for r in rows], [r[f"{q}_floor"] for r in rows]
                per_n[str(n)][f"{q}_excess"] = (
                    None
                    if None in measured or None in floor
                    else mean_ci(np.subtract(measured, floor), rng, args.bootstrap)
                )
        for q in QUANTITIES:
            measured = {n: [r[q] for r in rows] for n, rows in by_n.items()}
            floor = {n: [r[f"{q}_floor"] for r in rows] for n, rows in by_n.items()}
            complete = all(None not in v for v in (*measured.values(), *floor.values()))
            fits[q] = power_fit(measured, rng, args.bootstrap) if complete else None
            fits[f"{q}_excess"] = (
                power_fit(measured, rng, args.bootstrap, floor) if complete else None
            )
        out[short] = {"per_n": per_n, "fits": fits}
    return out


# -- report -------------------------------------------------------------------------------------
def fmt(x: dict[str, Any] | None) -> str:
    """``mean [lo, hi]`` in 3 significant digits; ``-`` when not measured."""
    if x is None:
        return "-"
    return f"{x['mean']:.3g} [{x['ci'][0]:.3g}, {x['ci'][1]:.3g}]"


def fmt_fit(fit: dict[str, Any] | None) -> str:
    """``alpha [lo, hi]`` plus what was dropped; ``-`` when not measured."""
    if fit is None:
        return "-"
    if fit["value"] is None:
        return fit["note"]
    ci = fit["note"] if fit["ci"] is None else f"[{fit['ci'][0]:.2f}, {fit['ci'][1]:.2f}]"
    text = f"{fit['value']:.2f} {ci}"
    if fit["dropped"]:
        text += f"; dropped n = {', '.join(fit['dropped'])}"
    return text


def report_tables(result: dict[str, Any]) -> list[str]:
    ex, sa, s = result["exact"], result["sampled"], result["settings"]
    rows = [
        [n, m, fmt(ex[m]["per_n"][n]["delta_stale"]), fmt(ex[m]["per_n"][n]["d_occ"])]
        for n in ex["naive"]["per_n"]
        for m in METHODS
    ]
    tables = [
        markdown_table(
            f"Exact relay (R = {s['rounds']}, K = {s['symbols']}, delta = {s['delta']}, "
            f"{s['inits']} inits x {s['stages']} stage(s); mean [95% CI])",
            ["n", "method", "Delta_stale", "D_occ"],
            rows,
        )
    ]
    rows = []
    for n in sa["naive"]["per_n"]:
        for m in METHODS:
            r = sa[m]["per_n"][n]
            rows.append(
                [
                    n,
                    m,
                    fmt(r["delta_stale"]),
                    fmt(r["delta_stale_floor"]),
                    fmt(r["delta_stale_excess"]),
                    fmt(r["exact_delta_stale"]),
                    fmt(r["d_occ"]),
                    fmt(r["d_occ_floor"]),
                    fmt(r["d_occ_excess"]),
                    fmt(r["exact_d_occ"]),
                ]
            )
    tables.append(
        markdown_table(
            f"Sampled through TeamTrainer (B = {s['sampled_problems']}, G = "
            f"{s['sampled_group']}, delta = {s['sampled_delta']}, {s['sampled_inits']} inits x "
            f"{s['sampled_stages']} stage(s); Delta_stale in J units; mean [95% CI])",
            [
                "n",
                "method",
                "Delta_stale measured",
                "noise floor",
                "measured - floor",
                "exact, same updates",
                "D_occ measured",
                "noise floor",
                "measured - floor",
                "exact, same updates",
            ],
            rows,
        )
    )
    fits = []
    for q in QUANTITIES:
        fits.append([f"{LABELS[q]}, exact", *(fmt_fit(ex[m]["fits"][q]) for m in METHODS)])
        for key, what in (
            (f"{q}_excess", "sampled, measured - floor"),
            (q, "sampled, measured"),
            (f"{q}_floor", "sampled, noise floor"),
            (f"exact_{q}", "sampled, exact of the same updates"),
        ):
            fits.append([f"{LABELS[q]}, {what}", *(fmt_fit(sa[m]["fits"][key]) for m in METHODS)])
    tables.append(
        markdown_table(
            "Power-law fits x ~ n^alpha (95% bootstrap CI over initialisations)",
            ["quantity", "naive alpha", "TeamTR alpha"],
            fits,
        )
    )
    pl = result.get("pipeline")
    if pl:
        rows = []
        for n in pl["naive"]["per_n"]:
            for m in METHODS:
                r = pl[m]["per_n"][n]
                rows.append(
                    [
                        n,
                        m,
                        fmt(r["avg_before"]),
                        fmt(r["avg_after"]),
                        fmt(r["delta_stale"]),
                        fmt(r["delta_stale_floor"]),
                        fmt(r["delta_stale_excess"]),
                        fmt(r["d_occ"]),
                        fmt(r["d_occ_floor"]),
                        fmt(r["d_occ_excess"]),
                    ]
                )
        tables.append(
            markdown_table(
                f"Coordination task: tiny LMs on teamtr/Pipeline-v0 (B = {s['pipeline_problems']}"
                f" x G = 4, {s['pipeline_stages']} stages, seeds {s['pipeline_seeds']}, "
                + (
                    "expert error 0.4 per step"
                    if s.get("pipeline_start") is None
                    else f"expert error 1 - {s['pipeline_start']}^(1/n) per step"
                )
                + "; "
                "per-stage means; held-out avg@2 on 100 distinct chains; mean [95% CI] over seeds)",
                [
                    "n",
                    "method",
                    "avg@2 before",
                    "after",
                    "Delta_stale",
                    "floor",
                    "- floor",
                    "D_occ (hashed)",
                    "floor",
                    "- floor",
                ],
                rows,
            )
        )
        fits = [
            [f"{LABELS[q]}, {what}", *(fmt_fit(pl[m]["fits"][key]) for m in METHODS)]
            for q in QUANTITIES
            for key, what in ((q, "measured"), (f"{q}_excess", "measured - floor"))
        ]
        tables.append(
            markdown_table(
                "Coordination task: power-law fits (95% bootstrap CI over seeds)",
                ["quantity", "naive alpha", "TeamTR alpha"],
                fits,
            )
        )
    return tables


def _fit_line(ax: Any, fit: dict[str, Any] | None, ns: list[int], **style: Any) -> None:
    if fit is None or fit["value"] is None:
        return
    x = np.linspace(min(ns), max(ns), 50)
    ax.plot(x, np.exp(fit["intercept"]) * x ** fit["value"], **style)


def _points(ax: Any, per_n: dict[str, Any], key: str, label: str, **style: Any) -> None:
    """Means with their CIs, where positive (a log axis cannot show the rest)."""
    pts = [(int(n), r[key]) for n, r in per_n.items() if r[key] is not None and r[key]["mean"] > 0]
    if not pts:
        return
    ns, xs = [p[0] for p in pts], [p[1] for p in pts]
    means = np.array([x["mean"] for x in xs])
    lo = np.maximum(means - np.array([x["ci"][0] for x in xs]), 0)
    lo = np.minimum(lo, means * 0.999)  # a CI reaching 0 is drawn down to near the axis floor
    hi = np.array([x["ci"][1] for x in xs]) - means
    ax.errorbar(ns, means, yerr=[lo, hi], label=label, capsize=3, **style)


def save_plot(result: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: Agg canvas, no display

    ex, sa = result["exact"], result["sampled"]
    colours = {"naive": "tab:red", "teamtr": "tab:blue"}
    fig = Figure(figsize=(10, 7.5))
    axes = fig.subplots(2, 2)
    for col, q in enumerate(QUANTITIES):
        top, bottom = axes[0][col], axes[1][col]
        for m, c in colours.items():
            ns = [int(n) for n in ex[m]["per_n"]]
            fit = ex[m]["fits"][q]
            alpha = "-" if fit["value"] is None else f"{fit['value']:.2f}"
            _points(top, ex[m]["per_n"], q, f"{m} (alpha {alpha})", color=c, fmt="o")
            _fit_line(top, fit, ns, color=c, lw=1)
            sns = [int(n) for n in sa[m]["per_n"]]
            fit = sa[m]["fits"][f"{q}_excess"]
            alpha = "-" if fit is None or fit["value"] is None else f"{fit['value']:.2f}"
            _points(
                bottom,
                sa[m]["per_n"],
                f"{q}_excess",
                f"{m} measured - floor (alpha {alpha})",
                color=c,
                fmt="o",
            )
            _fit_line(bottom, fit, sns, color=c, lw=1)
            _points(
                bottom,
                sa[m]["per_n"],
                f"{q}_floor",
                f"{m} noise floor",
                color=c,
                fmt="x",
                ls=":",
                alpha=0.6,
            )
            _points(
                bottom,
                sa[m]["per_n"],
                f"exact_{q}",
                f"{m} exact, same updates",
                color=c,
                fmt="s",
                mfc="none",
                alpha=0.6,
            )
        top.set_title(f"{LABELS[q]}, exact relay")
        bottom.set_title(f"{LABELS[q]}, sampled (TeamTrainer)")
        if not any(sa[m]["per_n"][n][q] is not None for m in colours for n in sa[m]["per_n"]):
            bottom.text(
                0.5, 0.5, "not reported by the trainer", ha="center", transform=bottom.transAxes
            )
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("team size n")
            ax.set_xticks(
                sorted(
                    {int(n) for n in ex["naive"]["per_n"]} | {int(n) for n in sa["naive"]["per_n"]}
                )
            )
            ax.set_xticklabels([str(t) for t in ax.get_xticks()])
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=70)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng([args.seed, 13])
    t0 = time.perf_counter()
    exact = exact_study(args, rng)
    t_exact = time.perf_counter() - t0
    sampled = sampled_study(args, rng)
    result = {
        "exact": exact,
        "sampled": sampled,
        "pipeline": pipeline_study(args, rng),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runtime_s": {"exact": t_exact, "total": time.perf_counter() - t0},
    }
    for table in report_tables(result):
        print(table, end="\n\n")
    print(f"exact {t_exact:.1f} s; total {result['runtime_s']['total']:.1f} s")
    if args.plot:
        save_plot(result, args.plot)
        print(f"wrote {args.plot}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
