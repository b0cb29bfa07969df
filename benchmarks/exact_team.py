"""Exact team games: staleness, surrogate error, occupancy drift and the certificate, measured
exactly on the n-agent relay (trainers/exact/; docs/exact-games.md).

For every n and every random initialisation, TeamTR and naive sequential run the same number of
noise-free stages from the same team at an equal budget (same Adam steps, lr, delta, beta). Per
stage the script records the surrogate error |L_used - (J_after - J_before)|, D_occ, every update's
exact KL_tok and the certificates. It fits error ~ n^alpha and D_occ ~ n^alpha (log-log fit of the
per-n means, bootstrap CI over initialisations), counts certificate violations, and compares the
final J. A small sampled section trains the same game through TeamTrainer (TabularPolicy agents on
teamtr/Relay-v0) and measures each sampled stage exactly.

Usage::

    .venv/bin/python benchmarks/exact_team.py [--quick] [--json OUT] [--rounds 1 2]
        [--inits 20] [--stages 10] [--ns 2 3 4 5 6 8] [--sampled-ns 2 3 4] ...

``--quick`` (what the tests run) uses fewer initialisations, stages and bootstrap resamples.
``alpha``/``certificate``/``final_J`` at the top of the JSON are for the primary ``R``
(``--primary-rounds``, default 2: with R = 1 TeamTR's surrogate is exact, so its error has no
power law); every R is under ``rounds``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table

from trainers.diagnostics.certificate import rank_correlation
from trainers.diagnostics.estimators import loglog_fit
from trainers.exact.games import RelayGame, random_logits
from trainers.exact.run import run_sampled, sampled_config
from trainers.exact.stages import METHODS, ExactSettings, ExactStage, run_exact

SHORT = {"teamtr": "teamtr", "naive_sequential": "naive"}
TOL = 1e-12  # floating-point slack when comparing a certificate with the true improvement


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small run (< 60 s), for tests")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--ns", type=int, nargs="+", default=[2, 3, 4, 5, 6, 8])
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--primary-rounds", type=int, default=2)
    parser.add_argument("--inits", type=int, default=None, help="initialisations per n (20)")
    parser.add_argument("--stages", type=int, default=None, help="stages per run (10)")
    parser.add_argument(
        "--fit-stages",
        type=int,
        default=1,
        help="the headline fits use the mean over the first this many stages of each run",
    )
    parser.add_argument("--symbols", type=int, default=4, help="K")
    parser.add_argument("--code", type=float, default=6.0, help="init: permutation-code strength")
    parser.add_argument("--noise", type=float, default=1.0, help="init: Gaussian logit scale")
    parser.add_argument("--delta", type=float, default=0.01)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument(
        "--ratio-clip", type=float, default=None, help="clip the surrogate (default: unclipped)"
    )
    parser.add_argument("--bootstrap", type=int, default=None, help="resamples (1000)")
    parser.add_argument("--sampled-ns", type=int, nargs="*", default=None, help="([2, 3, 4])")
    parser.add_argument("--sampled-inits", type=int, default=None, help="(4)")
    parser.add_argument("--sampled-stages", type=int, default=None, help="(4)")
    parser.add_argument("--sampled-problems", type=int, default=8, help="B per sampling event")
    parser.add_argument("--sampled-group", type=int, default=16, help="G rollouts per problem")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quick = {"inits": 6, "stages": 4, "bootstrap": 200}
    full = {"inits": 20, "stages": 10, "bootstrap": 1000}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    sampled: dict[str, Any] = {
        "sampled_ns": [2, 3] if args.quick else [2, 3, 4],
        "sampled_inits": 1 if args.quick else 4,
        "sampled_stages": 2 if args.quick else 4,
    }
    for key, value in sampled.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not 1 <= args.fit_stages <= args.stages:
        parser.error(f"--fit-stages must be in 1..--stages ({args.stages}), got {args.fit_stages}")
    if args.primary_rounds not in args.rounds:
        parser.error(
            f"--primary-rounds {args.primary_rounds} must be one of --rounds {args.rounds}"
        )
    if len(set(args.ns)) < 2:
        parser.error(f"--ns needs at least 2 distinct n for a power-law fit, got {args.ns}")
    return args


# -- statistics ---------------------------------------------------------------------------------
def mean_ci(values: Sequence[float], rng: np.random.Generator, resamples: int) -> dict[str, Any]:
    """Mean and a percentile-bootstrap 95% CI."""
    x = np.asarray(values, dtype=np.float64)
    idx = rng.integers(0, len(x), size=(resamples, len(x)))
    boot = x[idx].mean(axis=1)
    return {
        "mean": float(x.mean()),
        "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "n": len(x),
    }


def alpha_fit(
    per_n: dict[int, list[float]], rng: np.random.Generator, resamples: int
) -> dict[str, Any]:
    """``value ~ n^alpha`` on the per-n means; bootstrap over initialisations within each n.

    ``value`` is ``None`` (with a ``note``) when a mean is not positive (e.g. an exact surrogate).
    """
    ns = sorted(per_n)
    means = [float(np.mean(per_n[n])) for n in ns]
    if min(means) <= 1e-13:
        return {
            "value": None,
            "ci": None,
            "note": f"no power law: max per-n mean {max(means):.2e} (exact up to rounding)",
            "means": dict(zip(map(str, ns), means)),
        }
    alpha, intercept = loglog_fit(ns, means)
    boots = []
    arrays = {n: np.asarray(per_n[n]) for n in ns}
    for _ in range(resamples):
        m = [float(arrays[n][rng.integers(0, len(arrays[n]), len(arrays[n]))].mean()) for n in ns]
        if min(m) > 0:
            boots.append(loglog_fit(ns, m)[0])
    return {
        "value": alpha,
        "ci": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]
        if boots
        else None,
        "intercept": intercept,
        "means": dict(zip(map(str, ns), means)),
    }


# -- the exact study ----------------------------------------------------------------------------
TRAJECTORY_KEYS = ("error", "update_error", "delta_stale", "d_occ")


def exact_study(args: argparse.Namespace, rounds: int, rng: np.random.Generator) -> dict[str, Any]:
    """Both methods from the same initialisations; per-stage trajectories, fits and summaries.

    The headline fits use the mean over the first ``--fit-stages`` stages of each run (from the
    random initialisation, where every n is in the same regime); ``*_all_stages`` use every stage,
    and ``*_by_stage`` give the point estimate at each stage index.
    """
    settings = ExactSettings(
        steps=args.steps,
        lr=args.lr,
        delta=args.delta,
        beta=args.beta,
        ratio_clip=args.ratio_clip,
    )
    traj: dict[str, dict[str, dict[int, list[np.ndarray]]]] = {
        m: {key: {n: [] for n in args.ns} for key in TRAJECTORY_KEYS} for m in METHODS
    }
    j_final: dict[str, dict[int, list[float]]] = {m: {n: [] for n in args.ns} for m in METHODS}
    stages: dict[str, list[ExactStage]] = {m: [] for m in METHODS}
    j0: dict[int, list[float]] = {n: [] for n in args.ns}
    for n in args.ns:
        game = RelayGame(n, args.symbols, rounds)
        for i in range(args.inits):
            init_rng = np.random.default_rng([args.seed, n, i])
            logits = random_logits(game, init_rng, args.noise, args.code)
            for method in METHODS:
                _, run = run_exact(game, logits, method, settings, args.stages)
                stages[method] += run
                for key in TRAJECTORY_KEYS:
                    key_attr = "surrogate_error" if key == "error" else key
                    traj[method][key][n].append(np.array([getattr(s, key_attr) for s in run]))
                j_final[method][n].append(run[-1].j_after)
            j0[n].append(run[0].j_before)
    fit = args.fit_stages
    out: dict[str, Any] = {
        "rounds": rounds,
        "fit_stages": fit,
        "j_init": {str(n): float(np.mean(v)) for n, v in j0.items()},
    }
    for method in METHODS:
        rec = traj[method]
        flat = [u for s in stages[method] for u in s.updates]
        summary: dict[str, Any] = {}
        for key in TRAJECTORY_KEYS:
            head = {n: [float(x[:fit].mean()) for x in rec[key][n]] for n in args.ns}
            every = {n: [float(x.mean()) for x in rec[key][n]] for n in args.ns}
            summary[f"alpha_{key}"] = alpha_fit(head, rng, args.bootstrap)
            summary[f"alpha_{key}_all_stages"] = alpha_fit(every, rng, args.bootstrap)
            summary[f"alpha_{key}_by_stage"] = [
                alpha_fit({n: [float(x[s]) for x in rec[key][n]] for n in args.ns}, rng, 0)["value"]
                for s in range(args.stages)
            ]
            summary.setdefault("per_n", {})
            for n in args.ns:
                row = summary["per_n"].setdefault(str(n), {})
                row[key] = mean_ci(head[n], rng, args.bootstrap)
                row[f"{key}_all_stages"] = mean_ci(every[n], rng, args.bootstrap)
        for n in args.ns:
            summary["per_n"][str(n)]["j_final"] = mean_ci(j_final[method][n], rng, args.bootstrap)
        summary.update(
            {
                "final_J": mean_ci(
                    [x for n in args.ns for x in j_final[method][n]], rng, args.bootstrap
                ),
                "updates": len(flat),
                "out_of_region_rate": float(np.mean([not u.in_region for u in flat])),
                "reverted_rate": float(np.mean([not u.accepted for u in flat])),
                "kl_tok_over_delta": float(np.mean([u.kl_tok for u in flat]) / args.delta),
                "certificate": certificate_summary(stages[method]),
            }
        )
        out[SHORT[method]] = summary
    diffs = [
        b - a for n in args.ns for a, b in zip(j_final["naive_sequential"][n], j_final["teamtr"][n])
    ]
    out["final_J_difference"] = mean_ci(diffs, rng, args.bootstrap)  # teamtr - naive, paired
    return out


def certificate_summary(stages: Sequence[ExactStage]) -> dict[str, Any]:
    in_region = [s for s in stages if s.all_in_region]
    gain = [s.improvement for s in stages]
    return {
        "stages": len(in_region),
        "stages_all": len(stages),
        "violations": sum(s.certificate > s.improvement + TOL for s in in_region),
        "violations_all": sum(s.certificate > s.improvement + TOL for s in stages),
        "violations_radius": sum(s.certificate_radius > s.improvement + TOL for s in in_region),
        "violations_paper": sum(s.certificate_paper > s.improvement + TOL for s in in_region),
        "violations_exact_zero_tolerance": sum(s.certificate > s.improvement for s in in_region),
        "mean_improvement": float(np.mean(gain)),
        "mean_lower_bound": float(np.mean([s.certificate for s in stages])),
        "mean_lower_bound_radius": float(np.mean([s.certificate_radius for s in stages])),
        "mean_lower_bound_paper": float(np.mean([s.certificate_paper for s in stages])),
        "rank_correlation": rank_correlation([s.certificate for s in stages], gain),
    }


# -- the sampled study --------------------------------------------------------------------------
def sampled_study(
    args: argparse.Namespace, rounds: int, rng: np.random.Generator
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rounds": rounds,
        "problems_per_batch": args.sampled_problems,
        "group_size": args.sampled_group,
        "inits": args.sampled_inits,
        "stages": args.sampled_stages,
        "per_n": {},
    }
    for n in args.sampled_ns:
        game = RelayGame(n, args.symbols, rounds)
        row: dict[str, Any] = {}
        for method in METHODS:
            errors, exact_errors, finals, out_rate = [], [], [], []
            for i in range(args.sampled_inits):
                logits = random_logits(
                    game, np.random.default_rng([args.seed, n, i]), args.noise, args.code
                )
                cfg = sampled_config(
                    method,
                    seed=args.seed + i,
                    schedule={
                        "problems_per_batch": args.sampled_problems,
                        "group_size": args.sampled_group,
                    },
                    trust_region={"delta": args.delta},
                )
                run = run_sampled(game, logits, cfg, args.sampled_stages)
                errors += [s.surrogate_error for s in run]
                exact_errors += [s.exact_error for s in run]
                finals.append(run[-1].j_after)
                out_rate += [
                    kl > args.delta for s in run for kl, ok in zip(s.kl_tok, s.accepted) if ok
                ]
            row[SHORT[method]] = {
                "error": mean_ci(errors, rng, args.bootstrap),
                "exact_error": mean_ci(exact_errors, rng, args.bootstrap),
                "final_J": float(np.mean(finals)),
                "exact_out_of_region_rate": float(np.mean(out_rate)) if out_rate else math.nan,
            }
        out["per_n"][str(n)] = row
    return out


# -- report -------------------------------------------------------------------------------------
def fmt_alpha(a: dict[str, Any]) -> str:
    if a["value"] is None:
        return "exact (no fit)"
    return f"{a['value']:.2f} [{a['ci'][0]:.2f}, {a['ci'][1]:.2f}]"


def fmt_point(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def fmt_ci(x: dict[str, Any], digits: int = 3, sci: bool = False) -> str:
    f = (lambda v: f"{v:.2e}") if sci else (lambda v: f"{v:.{digits}f}")
    return f"{f(x['mean'])} [{f(x['ci'][0])}, {f(x['ci'][1])}]"


def print_report(result: dict[str, Any]) -> None:
    for r, study in result["rounds"].items():
        nv_all, tr_all = study["naive"], study["teamtr"]
        first = f"first {study['fit_stages']}" if study["fit_stages"] > 1 else "stage 1"
        rows = []
        for n in nv_all["per_n"]:
            nv, tr = nv_all["per_n"][n], tr_all["per_n"][n]
            rows.append(
                [
                    n,
                    f"{study['j_init'][n]:.3f}",
                    fmt_ci(nv["error"], sci=True),
                    fmt_ci(tr["error"], sci=True),
                    f"{nv['error_all_stages']['mean']:.2e}",
                    f"{tr['error_all_stages']['mean']:.2e}",
                    f"{nv['d_occ']['mean']:.3f}",
                    f"{tr['d_occ']['mean']:.3f}",
                    fmt_ci(nv["j_final"]),
                    fmt_ci(tr["j_final"]),
                ]
            )
        print(
            markdown_table(
                f"Surrogate error per stage, D_occ and final J (exact, R = {r}; mean [95% CI])",
                [
                    "n",
                    "J init",
                    f"naive error ({first})",
                    f"TeamTR error ({first})",
                    "naive error (all stages)",
                    "TeamTR error (all stages)",
                    f"naive D_occ ({first})",
                    f"TeamTR D_occ ({first})",
                    "naive final J",
                    "TeamTR final J",
                ],
                rows,
            )
        )
        print()
        names = {
            "error": "surrogate error",
            "update_error": "sum_i per-update error",
            "delta_stale": "Delta_stale = sum_i |L_stale - L_seq|",
            "d_occ": "D_occ",
        }
        fits = []
        for key, label in names.items():
            for suffix, when in (("", first), ("_all_stages", "all stages")):
                fits.append(
                    [
                        f"{label} ({when})",
                        fmt_alpha(nv_all[f"alpha_{key}{suffix}"]),
                        fmt_alpha(tr_all[f"alpha_{key}{suffix}"]),
                    ]
                )
        print(
            markdown_table(
                f"Power-law fits x ~ n^alpha (R = {r}; 95% bootstrap CI over initialisations)",
                ["quantity", "naive alpha", "TeamTR alpha"],
                fits,
            )
        )
        print()
        by_stage = [
            [
                i + 1,
                fmt_point(nv_all["alpha_error_by_stage"][i]),
                fmt_point(tr_all["alpha_error_by_stage"][i]),
                fmt_point(nv_all["alpha_d_occ_by_stage"][i]),
            ]
            for i in range(len(nv_all["alpha_error_by_stage"]))
        ]
        print(
            markdown_table(
                f"alpha of the surrogate error at each stage index (R = {r})",
                ["stage", "naive error alpha", "TeamTR error alpha", "naive D_occ alpha"],
                by_stage,
            )
        )
        print()
        certs = []
        for m in ("naive", "teamtr"):
            c, st = study[m]["certificate"], study[m]
            certs.append(
                [
                    m,
                    f"{c['violations']}/{c['stages']}",
                    f"{c['violations_all']}/{c['stages_all']}",
                    f"{c['violations_radius']}/{c['stages']}",
                    f"{c['violations_paper']}/{c['stages']}",
                    f"{c['mean_improvement']:.2e}",
                    f"{c['mean_lower_bound']:.2e}",
                    f"{c['mean_lower_bound_radius']:.2e}",
                    f"{c['mean_lower_bound_paper']:.2e}",
                    f"{c['rank_correlation']:.2f}",
                    f"{st['out_of_region_rate']:.3f}",
                ]
            )
        print(
            markdown_table(
                f"Certificates (R = {r}): violations / stages",
                [
                    "method",
                    "measured-KL form (in region)",
                    "measured-KL form (all)",
                    "radius form",
                    "paper form",
                    "mean dJ",
                    "mean LB",
                    "mean LB radius",
                    "mean LB paper",
                    "rank corr",
                    "exact out-of-region rate",
                ],
                certs,
            )
        )
        d = study["final_J_difference"]
        print(f"\nfinal J, TeamTR - naive (paired, R = {r}): {fmt_ci(d, digits=4)}\n")
    s = result["sampled"]
    rows = []
    for n, row in s["per_n"].items():
        for m in ("naive", "teamtr"):
            x = row[m]
            rows.append(
                [
                    n,
                    m,
                    fmt_ci(x["error"], sci=True),
                    fmt_ci(x["exact_error"], sci=True),
                    f"{x['final_J']:.3f}",
                    f"{x['exact_out_of_region_rate']:.3f}",
                ]
            )
    print(
        markdown_table(
            f"Sampled through TeamTrainer (R = {s['rounds']}, B = {s['problems_per_batch']}, G = {s['group_size']}, {s['inits']} inits x {s['stages']} stages)",
            [
                "n",
                "method",
                "sampled surrogate error",
                "exact error of the same updates",
                "final J",
                "exact out-of-region rate",
            ],
            rows,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    rng = np.random.default_rng([args.seed, 99])
    studies = {str(r): exact_study(args, r, rng) for r in args.rounds}
    t_exact = time.perf_counter() - t0
    sampled = sampled_study(args, args.primary_rounds, rng)
    primary = studies[str(args.primary_rounds)]
    certificate = {
        "violations": sum(
            s[m]["certificate"]["violations"] for s in studies.values() for m in SHORT.values()
        ),
        "stages": sum(
            s[m]["certificate"]["stages"] for s in studies.values() for m in SHORT.values()
        ),
        "violations_all": sum(
            s[m]["certificate"]["violations_all"] for s in studies.values() for m in SHORT.values()
        ),
        "stages_all": sum(
            s[m]["certificate"]["stages_all"] for s in studies.values() for m in SHORT.values()
        ),
        "violations_radius": sum(
            s[m]["certificate"]["violations_radius"]
            for s in studies.values()
            for m in SHORT.values()
        ),
        "violations_paper": sum(
            s[m]["certificate"]["violations_paper"]
            for s in studies.values()
            for m in SHORT.values()
        ),
        "note": "violations: stages whose every update is inside its region (exact KL_tok <= delta), all R and both methods",
    }
    result = {
        "alpha": {m: primary[m]["alpha_error"] for m in ("naive", "teamtr")},
        "alpha_all_stages": {m: primary[m]["alpha_error_all_stages"] for m in ("naive", "teamtr")},
        "alpha_d_occ": {m: primary[m]["alpha_d_occ"] for m in ("naive", "teamtr")},
        "certificate": certificate,
        "final_J": {m: primary[m]["final_J"] for m in ("naive", "teamtr")},
        "final_J_difference": primary["final_J_difference"],
        "rounds": studies,
        "sampled": sampled,
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "runtime_s": {"exact": t_exact, "total": time.perf_counter() - t0},
    }
    print_report(result)
    print(
        f"\nexact: {t_exact:.1f} s; total {result['runtime_s']['total']:.1f} s; certificate "
        f"violations {certificate['violations']}/{certificate['stages']} in-region stages"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
