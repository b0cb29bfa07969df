"""The swap shock: replacing one agent of a trained team, directly, after Stage-0 alignment, or by
retraining the new team from scratch (paper Sec. 5.8, Fig. 6).

On the demo's task (teamtr/Pipeline-v0, three tiny local models, behaviour-cloned to a weak start)
it trains the team with TeamTR for ``--stages-before`` stages, builds a NEW model for one seat
(a larger, differently seeded tiny Llama with the same character tokenizer, behaviour-cloned on
other expert data: another seed and error rate), and then measures three rows at the same
post-swap budget of ``--stages-after`` TeamTR stages:

* **direct swap**: ``swap_agent`` without alignment (the new model takes the seat as it is);
* **aligned swap**: ``swap_agent`` with Stage-0 alignment (KL(new || old) on probe contexts from
  the trained team's occupancy at that agent's turns, until the held-out monitor <= delta_align);
* **retrain from scratch**: the original run's start (the behaviour-cloned team at stage 0) with
  the new model in the seat from the beginning, trained for the same number of stages.

Each row reports held-out (test split) avg@K right before the swap, right after it, and after
the post-swap stages, and the validation split's avg@K after every post-swap stage (the
recovery curve; the run's periodic validation), on up to ``eval.problems`` distinct problems.

Usage::

    .venv/bin/python benchmarks/swap_shock.py [--agent step2] [--stages-before 4]
        [--stages-after 4] [--out runs/swap-shock] [--json swap_shock.json] [--quick]
        [--set KEY=VALUE ...]

``--quick`` is a one-to-two-minute check (small cloning, evaluations and alignment). Prints a
table and writes the JSON (every row's swap record). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _bench import markdown_table
from rich.console import Console

from adapters.hf import HFPolicy
from adapters.team import AgentPolicyConfig, TeamConfig
from adapters.tiny import TinyModelSpec, build_tiny_model
from trainers.config import TrainConfig
from trainers.optim.sft import SFTConfig, behaviour_clone, collect_expert_data
from trainers.run.config_file import config_from_overrides
from trainers.run.logger import read_jsonl
from trainers.run.recipe import env_factory, run_training
from trainers.run.warm_start import behaviour_clone_cache
from trainers.tools.align import AlignConfig
from trainers.tools.swap import SwapConfig, swap_agent

QUICK = [
    "sft.steps=150",
    "sft.problems=300",
    "schedule.problems_per_batch=8",
    "eval.problems=60",
    "eval.train_distribution=false",
]
FULL = ["eval.train_distribution=false"]
NEW_MODEL = TinyModelSpec(hidden_size=160, num_layers=2, num_heads=4, intermediate_size=640, seed=7)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="step2", help="the seat that gets the new model")
    parser.add_argument(
        "--stages-before", type=int, default=4, help="TeamTR stages before the swap"
    )
    parser.add_argument("--stages-after", type=int, default=4, help="TeamTR stages after the swap")
    parser.add_argument("--out", default="runs/swap-shock", help="working folder (replaced)")
    parser.add_argument(
        "--json", default=None, help="where to write the results (default OUT/swap_shock.json)"
    )
    parser.add_argument("--quick", action="store_true", help="a one-to-two-minute check")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.quick:
        args.stages_before, args.stages_after = (
            min(args.stages_before, 2),
            min(args.stages_after, 1),
        )
    torch.set_num_threads(1)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    quiet = Console(file=io.StringIO())
    t0 = time.perf_counter()
    base = config_from_overrides(
        [
            *(QUICK if args.quick else FULL),
            f"sft.cache_dir={out / 'cache'}",
            "progress=false",
            "torch_threads=1",
            *args.set,
        ]
    )
    original = dataclasses.replace(
        base,
        run_dir=str(out / "original"),
        schedule=dataclasses.replace(base.schedule, stages=args.stages_before),
    )
    print(f"original run: behaviour cloning + {args.stages_before} TeamTR stages ...", flush=True)
    summary = run_training(original, console=quiet)
    k = base.eval.k
    print(
        f"  held-out avg@{k} {summary['before'][f'eval/avg@{k}']:.3f} -> "
        f"{summary['after'][f'eval/avg@{k}']:.3f} ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    start = _stage0_team(original, out)
    new_model = _new_model(base, args.agent, out, args.quick)
    print(f"new model for {args.agent}: {new_model} ({time.perf_counter() - t0:.0f} s)", flush=True)

    rows: dict[str, dict[str, Any]] = {}
    for name, align in (
        ("direct swap", None),
        ("aligned swap", _align_settings(args.quick)),
    ):
        print(f"{name} ...", flush=True)
        record = swap_agent(
            SwapConfig(
                str(out / "original"),
                args.agent,
                str(new_model),
                out=str(out / name.replace(" ", "-")),
                stages=args.stages_after,
                align=align,
            ),
            console=quiet,
        )
        rows[name] = record
        print(f"  done ({time.perf_counter() - t0:.0f} s)", flush=True)
    print("retrain from scratch ...", flush=True)
    rows["retrain from scratch"] = _from_scratch(base, start, new_model, args, out)
    rows["retrain from scratch"]["before_swap"] = rows["direct swap"]["before_swap"]
    wall = time.perf_counter() - t0

    header = [
        "row",
        f"test avg@{k} before swap",
        "right after swap",
        *[f"val after +{i}" for i in range(1, args.stages_after + 1)],
        f"test after +{args.stages_after}",
        "alignment",
    ]
    table = []
    for name, r in rows.items():
        curve = [s.get(f"val/avg@{k}", math.nan) for s in r["per_stage"]]
        alignment = r.get("alignment")
        table.append(
            [
                name,
                _ci(r["before_swap"], f"eval/avg@{k}"),
                _ci(r["after_swap"], f"eval/avg@{k}"),
                *[f"{v:.3f}" for v in curve],
                f"{r['final'][f'eval/avg@{k}']:.3f}",
                "-"
                if not alignment
                else f"{alignment['steps']} steps, KL {alignment['initial_kl']:.3f} -> "
                f"{alignment['final_kl']:.3f}",
            ]
        )
    distinct = rows["direct swap"]["after_swap"].get("problems/eval_distinct")
    print()
    print(
        markdown_table(
            f"Swap shock on teamtr/Pipeline-v0 ({args.agent} replaced after {args.stages_before} "
            f"stages; {distinct:.0f} distinct held-out problems x K={k}; {wall:.0f} s)",
            header,
            table,
        )
    )
    path = Path(args.json) if args.json else out / "swap_shock.json"
    path.write_text(
        json.dumps(
            {
                "agent": args.agent,
                "stages_before": args.stages_before,
                "stages_after": args.stages_after,
                "quick": args.quick,
                "overrides": args.set,
                "new_model": dataclasses.asdict(NEW_MODEL),
                "original": {k_: summary[k_] for k_ in ("before", "after", "wall_s")},
                "rows": rows,
                "wall_s": wall,
            },
            indent=2,
            default=str,
        )
    )
    print(f"\nwritten: {path}")
    return 0


def _ci(metrics: dict[str, Any], key: str) -> str:
    low, high = metrics.get(f"ci/{key}_low"), metrics.get(f"ci/{key}_high")
    value = metrics[key]
    return f"{value:.3f}" if low is None else f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _align_settings(quick: bool) -> AlignConfig:
    if quick:
        return AlignConfig(probes=60, max_steps=30, eval_every=5, batch_size=16, lr=1e-3)
    return AlignConfig(probes=500, max_steps=300, eval_every=10, batch_size=32, lr=1e-3)


def _stage0_team(original: TrainConfig, out: Path) -> dict[str, Path]:
    """The original run's start (its behaviour-cloned team, from the cloning cache) saved as one
    model directory per agent."""
    cache = behaviour_clone_cache(original)
    assert cache is not None and cache.exists()
    states = torch.load(cache, weights_only=True)["states"]
    paths = {}
    for agent, state in states.items():
        policy = HFPolicy.from_pretrained(Path(original.run_dir) / "models" / "tiny")
        policy.load_state_dict(state)
        paths[agent] = out / "stage0" / agent
        policy.save_pretrained(paths[agent])
    return paths


def _new_model(base: TrainConfig, agent: str, out: Path, quick: bool) -> Path:
    """A larger, differently seeded tiny Llama with the same tokenizer, behaviour-cloned on every
    agent's messages of another expert (seed 1, error rate 0.5)."""
    path = build_tiny_model(out / "new-model", NEW_MODEL)
    policy = HFPolicy.from_pretrained(path)
    env_fn = env_factory(base, "train")
    env = env_fn()
    data = collect_expert_data(
        env_fn, env.task, list(env.possible_agents), 300 if quick else 2000, error_rate=0.5, seed=1
    )
    merged = [pair for a in env.possible_agents for pair in data[a]]
    sft = SFTConfig(steps=150 if quick else 600, batch_size=64, seed=1)
    behaviour_clone({agent: policy}, {agent: merged}, sft, progress=False)
    policy.save_pretrained(path)
    return path


def _from_scratch(
    base: TrainConfig, start: dict[str, Path], new_model: Path, args: Any, out: Path
) -> dict[str, Any]:
    """The original run's start with the new model in the seat, trained for the post-swap
    budget; its record has the swap records' shape."""
    team = TeamConfig(
        agents={
            a: AgentPolicyConfig(path=str((new_model if a == args.agent else p).resolve()))
            for a, p in start.items()
        }
    )
    config = dataclasses.replace(
        base,
        team=team,
        sft=None,
        run_dir=str(out / "from-scratch"),
        schedule=dataclasses.replace(base.schedule, stages=args.stages_after),
        eval=dataclasses.replace(base.eval, every=1),
    )
    summary = run_training(config, console=Console(file=io.StringIO()))
    k = base.eval.k
    per_stage = [
        {"stage": r["step"], **{key: v for key, v in r.items() if key.startswith("val/")}}
        for r in read_jsonl(out / "from-scratch" / "metrics.jsonl")
        if r["step"] > 0 and f"val/avg@{k}" in r
    ]
    after = {
        **summary["before"],
        **{
            f"ci/{n}_{s}": v
            for n, ci in summary["before_ci"].items()
            for s, v in zip(("low", "high"), ci)
        },
    }
    return {
        "after_swap": after,
        "per_stage": per_stage,
        "final": summary["after"],
        "alignment": None,
    }


if __name__ == "__main__":
    sys.exit(main())
