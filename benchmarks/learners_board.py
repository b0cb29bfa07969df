"""The learners board: every built-in learner on team envs of different structure, at an equal
budget, with paired CIs against TeamTR.

Usage::

    .venv/bin/python benchmarks/learners_board.py --out runs/board [--quick]
        [--envs relay pipeline convention] [--seeds 0 1 2] [--learners teamtr at_grpo ...]

Each board env is one ``teamtr compare`` (:func:`trainers.tools.compare.compare`) of the learners
on the same seeds, so every learner gets the same rollouts and gradient work per update and the
same behaviour-cloned start per seed; its run directories and reports are in ``OUT/<env>/``:

* ``relay``: ``teamtr/Relay-v0`` with four tabular agents (``benchmarks/configs/relay_tabular.yaml``):
  exact J is known, so the board reads the trained team's exact J (no sampling noise);
* ``pipeline``: ``teamtr/Pipeline-v0`` with three tiny language models, each doing one step of a
  chain and seeing only the previous message (the demo's configuration);
* ``convention``: ``teamtr/Convention-v0`` with three tiny language models from a miscoordinated
  start (``benchmarks/configs/convention.yaml``; its behaviour cloning alone takes about 7.5
  minutes per seed on 2 cores).

The board prints a table (per env and learner: the metric after training, mean ± std over seeds,
and the paired difference against TeamTR with its 95% bootstrap CI over seeds and problems) and
writes ``OUT/board.json``, ``OUT/board.md`` and ``OUT/board.png``. ``--quick`` (minutes; the slow
test runs it) shrinks every env to a smoke run: it checks the machinery, not the learners.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _bench import markdown_table, write_outputs
from rich.console import Console

from trainers.tools.compare import CompareSpec, compare, learner_entry, run_configs
from trainers.tools.compare_stats import (
    EXACT_KEY,
    generation_line,
    paired_difference,
    paired_exact,
    per_problem_avg,
    short_label,
)

ROOT = Path(__file__).resolve().parents[1]
LEARNERS = ("teamtr", "at_grpo", "naive_sequential", "joint", "independent", "teamtr_tree")
#: ``--ablation``: what carries AT-GRPO's lead, same-context groups or no trust region
#: (docs/benchmarks/learners.md, "What carries AT-GRPO's lead").
#: PettingLLMs' own update, as its AT-GRPO runs verl's PPO loss (docs/adding-a-trainer.md).
PETTINGLLMS_UPDATE = (
    "optim.ratio_level=token",
    "optim.ratio_clip=0.2",
    "optim.dual_clip=3",
    "optim.advantage_std=unbiased",
    "optim.a_clip=null",
    "optim.epochs=1",
    "trust_region.beta=0",
    "trust_region.adapt_beta=false",
)
ABLATION = (
    "teamtr",
    "at_grpo",
    "at_grpo+tr=at_grpo:learner_options.trust_region=true",
    "teamtr-no-radius=teamtr:trust_region.delta_mode=none",
    "teamtr_tree",
    "at_grpo-pettingllms=at_grpo:" + ",".join(PETTINGLLMS_UPDATE),
    # the same loss at the board's gradient work (optim.epochs as every other learner's)
    "at_grpo-pettingllms-epochs=at_grpo:"
    + ",".join(s for s in PETTINGLLMS_UPDATE if not s.startswith("optim.epochs")),
    # is it the loss or the learner: TeamTR with the same update, its trust region kept
    "teamtr-pettingllms=teamtr:" + ",".join(PETTINGLLMS_UPDATE),
)
# a smoke run of a language-model env: two short stages from a short behaviour cloning
LM_QUICK = (
    "schedule.stages=2",
    "schedule.problems_per_batch=8",
    "sft.steps=100",
    "sft.problems=200",
    "eval.problems=40",
    "eval.train_distribution=false",
)
ENVS: dict[str, dict[str, Any]] = {
    "relay": {
        "task": "teamtr/Relay-v0",
        "config": "benchmarks/configs/relay_tabular.yaml",
        "metric": "exact J",
        "quick": ("schedule.stages=2", "schedule.problems_per_batch=8", "eval.problems=16"),
    },
    "pipeline": {
        "task": "teamtr/Pipeline-v0",
        "config": None,
        "metric": "held-out avg@4",
        "quick": LM_QUICK,
    },
    "convention": {
        "task": "teamtr/Convention-v0",
        "config": "benchmarks/configs/convention.yaml",
        "metric": "held-out avg@4",
        "quick": (*LM_QUICK, "diagnostics=off"),
    },
}


def env_spec(
    name: str, learners: Sequence[str], seeds: Sequence[int], out: Path, quick: bool
) -> CompareSpec:
    """One board env's comparison: its runs and reports in ``out/name``."""
    env = ENVS[name]
    return CompareSpec(
        task=env["task"],
        learners=tuple(learners),
        seeds=tuple(seeds),
        out=out / name,
        config_file=ROOT / env["config"] if env["config"] else None,
        overrides=tuple(env["quick"]) if quick else (),
    )


def run_env(
    name: str, learners: Sequence[str], seeds: Sequence[int], out: Path, quick: bool
) -> dict[str, Any]:
    """One board env: its comparison (continued if ``out/name`` holds it), as compare.json."""
    return compare(env_spec(name, learners, seeds, out, quick), Console(stderr=True))


def extra_pairs(spec: CompareSpec, pairs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """``A - B`` for each ``(A, B)`` of ``pairs`` (learners of ``spec``: a variant by its label),
    paired as the
    comparison pairs every learner with its reference: exact J by seed where the team is
    tabular, else held-out avg@K by seed and problem, with a 95% bootstrap CI."""
    summaries = {
        label: {
            seed: json.loads((Path(c.run_dir) / "summary.json").read_text())
            for seed, c in by_seed.items()
        }
        for label, by_seed in run_configs(spec).items()
    }
    out = []

    def runs(name: str) -> dict[int, Any]:  # a variant's label, or a learner's name or entry
        return summaries[name] if name in summaries else summaries[learner_entry(name)[0]]

    for a, b in pairs:
        first, other = runs(b), runs(a)
        exact = all(EXACT_KEY in s["after"] for s in (*first.values(), *other.values()))
        if exact:
            diff = paired_exact(
                {k: s["after"][EXACT_KEY] for k, s in first.items()},
                {k: s["after"][EXACT_KEY] for k, s in other.items()},
            )
        else:
            diff = paired_difference(
                {k: per_problem_avg(s) for k, s in first.items()},
                {k: per_problem_avg(s) for k, s in other.items()},
            )
        out.append({"a": a, "b": b, "metric": "exact J" if exact else "avg@K", **diff})
    return out


def board_rows(name: str, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per learner: the env's metric after training (exact J where the team is tabular), mean
    and std over seeds, and the paired difference against the reference with its CI."""
    paired = {p["learner"]: p for p in data["paired"]}
    budget = data.get("budget", {})
    rows = []
    for learner, result in data["results"].items():
        exact = "exact_after" in result
        after = result["exact_after"] if exact else result["after"]
        p = paired.get(learner)
        diff = None if p is None else (p.get("exact") if exact else p)
        rows.append(
            {
                "env": name,
                "learner": learner,
                "metric": "exact J" if exact else data["metric"],
                "after_mean": _mean(after),
                "after_std": _std(after),
                "diff": None if diff is None else diff["mean"],
                "ci": None if diff is None else diff["ci"],
                # one seed gives no interval over seeds: nothing separates on it
                "separates": None
                if diff is None or len(after) < 2
                else not diff["ci"][0] <= 0 <= diff["ci"][1],
                # what it generated for training, per stage (mean over seeds), and its ratio
                # to the reference's on the same seeds
                **_generated_per_stage(budget.get("generated", {}).get(learner, {})),
                "generated_ratio": budget.get("generated_ratio", {}).get(learner),
            }
        )
    return rows


def _generated_per_stage(made: Mapping[Any, Any]) -> dict[str, float]:
    runs = [m for m in made.values() if m and m["stages"] > 0]
    return {
        f"generated_{key}_per_stage": _mean([m[key] / m["stages"] for m in runs])
        for key in ("messages", "tokens")
    }


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return float(math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)))


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None or not math.isfinite(value) else fmt.format(value)


def markdown(rows: Sequence[Mapping[str, Any]], reference: str) -> str:
    header = [
        "env",
        "learner",
        "metric",
        "after (mean ± std)",
        f"paired diff vs {reference}",
        "95% CI",
        "separates",
        "generated msgs / stage",
        "msgs, tokens vs ref",
    ]
    table = [
        [
            r["env"],
            r["learner"],
            r["metric"],
            f"{r['after_mean']:.3f} ± {r['after_std']:.3f}",
            "-" if r["diff"] is None else f"{r['diff']:+.3f}",
            "-" if r["ci"] is None else f"[{r['ci'][0]:+.3f}, {r['ci'][1]:+.3f}]",
            "-" if r["separates"] is None else ("yes" if r["separates"] else "no"),
            _num(r.get("generated_messages_per_stage"), "{:.0f}"),
            "-"
            if not r.get("generated_ratio")
            else f"{r['generated_ratio']['messages']:.2f}x, {r['generated_ratio']['tokens']:.2f}x",
        ]
        for r in rows
    ]
    return markdown_table("Learners board", header, table)


def plot(
    rows: Sequence[Mapping[str, Any]], envs: Sequence[str], reference: str, path: Path
) -> None:
    """One panel per env: each learner's paired difference against the reference, with its
    95% CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 3.4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        mine = [r for r in rows if r["env"] == env and r["diff"] is not None]
        names = [short_label(r["learner"]) for r in mine]
        diffs = [r["diff"] for r in mine]
        low = [r["diff"] - r["ci"][0] for r in mine]
        high = [r["ci"][1] - r["diff"] for r in mine]
        ax.barh(names, diffs, xerr=[low, high], color="#4c72b0", capsize=3)
        ax.invert_yaxis()  # the learners top down, in the board's order
        ax.axvline(0, color="black", linewidth=0.8)
        metric = mine[0]["metric"] if mine else ""
        ax.set_title(f"{env}: {metric}", fontsize=10)
        ax.set_xlabel(f"learner - {short_label(reference)}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the board's directory")
    parser.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument(
        "--learners",
        nargs="+",
        default=None,
        help="learner names, or variants NAME:KEY=VALUE[,KEY=VALUE] (default: every built-in)",
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="the learners of the AT-GRPO ablation instead: " + " ".join(ABLATION),
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument(
        "--env-seeds",
        action="append",
        default=[],
        metavar="ENV=S,S,...",
        help="one env's seeds, instead of --seeds for it (e.g. convention=0,1,2,3)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run in minutes")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        default=[],
        metavar=("A", "B"),
        help="also report A - B (two of the learners), paired by seed (and problem), per env",
    )
    args = parser.parse_args(argv)
    if args.learners is None:
        args.learners = list(ABLATION if args.ablation else LEARNERS)
    seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    env_seeds = {name: list(seeds) for name in args.envs}
    for entry in args.env_seeds:
        name, _, listed = entry.partition("=")
        if name not in env_seeds or not listed:
            parser.error(f"--env-seeds {entry!r}: expected ENV=S,S,... for an env of --envs")
        env_seeds[name] = [int(s) for s in listed.split(",")]
    reference = learner_entry(args.learners[0])[0]
    rows: list[dict[str, Any]] = []
    envs: dict[str, Any] = {}
    for name in args.envs:
        data = run_env(name, args.learners, env_seeds[name], args.out, args.quick)
        rows += board_rows(name, data)
        envs[name] = {
            "task": data["task"],
            "seeds": env_seeds[name],
            "config": ENVS[name]["config"],
            "quick": args.quick,
            "budget": data["budget"],
            # messages per update and what was generated, per learner and seed
            "generation": generation_line(data["budget"]),
            "pairs": extra_pairs(
                env_spec(name, args.learners, env_seeds[name], args.out, args.quick), args.pair
            ),
            "compare": str(args.out / name / "compare.json"),
        }
    table = markdown(rows, reference)
    print(table)
    for name, env in envs.items():
        for p in env["pairs"]:
            print(
                f"{name}: {p['a']} - {p['b']} = {p['mean']:+.3f} "
                f"[{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}] ({p['metric']})"
            )
    for name, env in envs.items():
        print(
            f"{name}: training messages per update {'equal' if env['budget']['equal'] else 'NOT EQUAL'}; {env['generation']}"
        )
    result = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "learners": [learner_entry(name)[0] for name in args.learners],
        "reference": reference,
        "seeds": seeds if len({tuple(v) for v in env_seeds.values()}) == 1 else env_seeds,
        "envs": envs,
        "rows": rows,
    }
    (args.out / "board.md").write_text(table + "\n", encoding="utf-8")
    write_outputs(
        args.out / "board.json",
        json.loads(json.dumps(result, default=str)),
        args.out / "board.png",
        lambda path: plot(rows, args.envs, reference, path),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
