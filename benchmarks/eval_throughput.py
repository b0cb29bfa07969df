"""Evaluation throughput: ``evaluate`` on 500 problems x K=4 with a tiny model team.

Usage::

    .venv/bin/python benchmarks/eval_throughput.py [--problems 500] [--k 4] [--model DIR]
        [--protocols team,self_consistency] [--json out.json]

For each protocol it reports problems/s, episodes/s, tokens/s and the share of wall time spent
outside generation: the runner's own work (resets, context rendering, grading) plus the report's
work after the rollout (bootstrap intervals, breakdowns, coordination metrics, which grades every
message again). Issue 7's target: below 10% outside generation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import build_tiny_model
from teamtr_core.policy import SamplingParams
from teamtr_env.baselines import build_protocol
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner


def run(name: str, policy: HFPolicy, problems_n: int, k: int, max_new_tokens: int) -> dict:
    kwargs = {} if name == "team" else dict(build_protocol(name).env_kwargs)
    kwargs["split"] = "test"

    def env_fn():
        return teamtr_env.make("teamtr/Arith-v0", **kwargs)

    sampling = SamplingParams(temperature=0.8, max_new_tokens=max_new_tokens)
    runner = Runner(env_fn, policy, sampling, progress=False)
    problems = runner.sample_problems(problems_n, seed=0)
    t0 = time.perf_counter()
    report = evaluate(runner, problems, k, seed=0)
    total = time.perf_counter() - t0
    stats = report.batch.stats
    return {
        "protocol": name,
        "problems": problems_n,
        "k": k,
        "episodes": stats.envs,
        "tokens": stats.tokens_generated,
        "total_s": total,
        "generate_s": stats.policy_s,
        "outside_share": (total - stats.policy_s) / total,
        "problems_per_s": problems_n / total,
        "avg@k": report.metrics[f"avg@{k}"].mean,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="evaluation throughput with a tiny model")
    parser.add_argument("--problems", type=int, default=500)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--model", type=Path, help="model dir (default: build a tiny one)")
    parser.add_argument("--protocols", default="team,self_consistency")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    console = Console()
    console.print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    console.print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads"
    )
    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    policy = HFPolicy.from_pretrained(model_dir, micro_batch_size=256)
    rows = [
        run(name.strip(), policy, args.problems, args.k, args.max_new_tokens)
        for name in args.protocols.split(",")
    ]
    table = Table(title=f"evaluate(): {args.problems} problems x K={args.k}, tiny model, CPU")
    for col in (
        "protocol",
        "episodes",
        "tokens",
        "wall s",
        "problems/s",
        "tokens/s",
        "outside gen",
    ):
        table.add_column(col, justify="left" if col == "protocol" else "right")
    for r in rows:
        table.add_row(
            r["protocol"],
            str(r["episodes"]),
            str(r["tokens"]),
            f"{r['total_s']:.1f}",
            f"{r['problems_per_s']:.1f}",
            f"{r['tokens'] / r['total_s']:.0f}",
            f"{r['outside_share']:.1%}",
        )
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
