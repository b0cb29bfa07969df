"""Rollouts on Ray against the local runner: rollouts per second, serialisation and weight sync.

Usage::

    .venv/bin/python benchmarks/ray_runner.py [--problems 64] [--group 4] [--repeats 3] [--json OUT]

The tiny model (0.55M parameters) plays the demo's Pipeline team (3 agents, one message each,
12 new tokens) on ``--problems`` problems x ``--group`` samples, with the local ``Runner`` and
with ``RayRunner`` at 1 and 2 workers (one CPU and one torch thread each) on a local Ray. For
each: episodes per second (median of ``--repeats`` rollouts after a warm-up), the time to
publish one agent's weights (``sync``: ``ray.put`` of the state dict) and to load them in the
workers, and the speed-up over the local runner. A projection for larger clusters follows, its
assumptions printed with it. Quote the figures only from an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import build_tiny_model
from teamtr_core.policy import SamplingParams
from teamtr_env.runners import Runner

TASK = "teamtr/Pipeline-v0"
SAMPLING = SamplingParams(temperature=0.8, max_new_tokens=12)


def make_env() -> Any:
    return teamtr_env.make(TASK)


def measure(runner: Any, problems: list, group: int, repeats: int) -> dict[str, float]:
    runner.rollout(problems, group_size=group, seed=0)  # warm-up: pools, workers, first load
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        batch = runner.rollout(problems, group_size=group, seed=r + 1)
        times.append(time.perf_counter() - t0)
    wall = statistics.median(times)
    return {"episodes": batch.stats.envs, "wall_s": wall, "episodes_per_s": batch.stats.envs / wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import ray

    from teamtr_env.runners import RayRunner

    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    console = Console()
    model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    policies = {a: HFPolicy.from_pretrained(model) for a in make_env().possible_agents}
    local = Runner(make_env, policies, SAMPLING, progress=False)
    problems = local.sample_problems(args.problems, seed=0, distinct=False)
    rows: dict[str, dict[str, float]] = {
        "local": measure(local, problems, args.group, args.repeats)
    }
    for workers in (1, 2):
        runner = RayRunner(make_env, policies, SAMPLING, workers=workers)
        row = measure(runner, problems, args.group, args.repeats)
        # Weight sync: publish one agent's new weights, then one rollout loads them.
        agent = local.agents[0]
        t0 = time.perf_counter()
        runner.sync(agent, policies[agent], version=1)
        put_s = time.perf_counter() - t0
        before = runner.timing["sync_s"]
        runner.rollout(problems, group_size=args.group, seed=99)
        row.update(
            put_s=put_s,
            load_s=(runner.timing["sync_s"] - before) / workers,
            state_mb=sum(
                v.numel() * v.element_size() for v in policies[agent].state_dict().values()
            )
            / 2**20,
        )
        rows[f"ray, {workers} worker{'s' if workers > 1 else ''}"] = row
        runner.shutdown()
        time.sleep(1.0)  # let Ray take the killed workers' CPUs back
    base = rows["local"]["episodes_per_s"]
    table = Table(
        title=f"{TASK}, tiny model, {args.problems} problems x {args.group}, median of "
        f"{args.repeats} (machine: {os.cpu_count()} CPUs)"
    )
    for col in ("runner", "episodes/s", "speed-up", "sync put", "sync load"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, r in rows.items():
        table.add_row(
            name,
            f"{r['episodes_per_s']:.1f}",
            f"{r['episodes_per_s'] / base:.2f}",
            f"{r['put_s'] * 1e3:.1f} ms" if "put_s" in r else "-",
            f"{r['load_s'] * 1e3:.1f} ms" if "load_s" in r else "-",
        )
    console.print(table)
    one = rows["ray, 1 worker"]["episodes_per_s"]
    projection = {w: one * w * 0.9 for w in (8, 32, 128)}
    console.print(
        "projection (assumptions: a worker per CPU or GPU plays as fast as the 1-worker row; "
        "90% parallel efficiency, the loss coming from the slowest block and the driver's merge; "
        "weight sync stays a put plus one load per worker, since the state dict goes into the "
        "object store once): "
        + ", ".join(f"{w} workers ~{v:.0f} episodes/s" for w, v in projection.items())
    )
    result = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "rows": rows,
        "projection_episodes_per_s": projection,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
