"""Runner overhead: what the environments and the runner's bookkeeping cost per env step.

What is measured
----------------
``Runner.rollout`` plays many team episodes in lockstep and calls each agent's policy once per step
with the contexts of every episode where that agent is active. With a zero-cost policy
(``ConstantPolicy("Answer: 1")``: it returns a constant string, no model), the time spent outside
``generate`` is the price of the environments (cleaning messages, routing, rendering contexts,
scoring) and of the runner (grouping, seeding, records). This script times it at 1, 64 and 1024
parallel environments on ``teamtr/Arith-v0`` with the default three-agent round-robin team.

For every env count N it builds
``Runner(lambda: teamtr_env.make(task), ConstantPolicy("Answer: 1"), progress=False)``, draws N
problems with ``runner.sample_problems(N, seed)``, runs one warm-up rollout (which also fills the
runner's environment pool), then times ``runner.rollout(problems, group_size=1, seed=r)``
``--repeats`` times and reports medians:

* ``steps``: lockstep steps (``RolloutStats.steps``); ``policy calls``: ``generate`` calls summed
  over agents (``RolloutStats.total_policy_calls``, cross-checked with the policy's own counter).
* ``env-steps``: N x steps, the number of messages played.
* ``wall ms``: the whole ``rollout()`` call (``RolloutStats.wall_s``: env resets, the lockstep
  loop and the episode records).
* ``overhead µs/env-step``: ``RolloutStats.overhead_s / (N x steps)``: everything outside
  ``generate``.
* ``policy share %``: ``policy_s`` as a share of the whole call.

A second section repeats the measurement at N=64 with the task's scripted expert
(``ScriptedExpert(env.task)``, which writes realistic ``Answer: <n>`` replies after parsing the
context) for one round (3 turns) and two rounds (``teamtr_env.make(task, max_turns=6)``).

Why
---
The runner claims that a step costs one ``generate`` call per active agent, however many
environments run, so with a round-robin team policy calls must equal steps (not envs x steps).
The benchmark checks that for every run and exits with status 1, saying which run failed, if not.
The overhead target (env + runner bookkeeping below 5% of a tiny model's generation time on the
same rollout) will be measured when model adapters exist; until then this script reports the raw
per-step cost in absolute terms. For context only, it prints what fraction of a 64-message x
16-token step at ~6k tokens/s (about 170 ms; the throughput stated for a tiny model at batch 64 on a
2-core machine) the measured overhead would be. That fraction is an estimate from the stated
throughput, not a measurement against a model.

Usage::

    .venv/bin/python benchmarks/runner_overhead.py [--envs 1 64 1024] [--repeats 3]
        [--task teamtr/Arith-v0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

import teamtr_env
from adapters.scripted import ConstantPolicy, ScriptedExpert
from tasks.base import Problem
from teamtr_core.policy import Generation, Policy, PrivilegedPolicy, SamplingParams
from teamtr_env.env import TeamEnv
from teamtr_env.runners import Runner

# The stated (not measured here) throughput of a tiny model at batch 64 on this machine, used only
# to put the measured overhead in context.
EST_TOKENS_PER_S = 6000.0
EST_BATCH = 64
EST_TOKENS_PER_MESSAGE = 16
EST_STEP_MS = EST_BATCH * EST_TOKENS_PER_MESSAGE / EST_TOKENS_PER_S * 1e3  # ≈ 170.7 ms
EST_MESSAGE_US = EST_STEP_MS * 1e3 / EST_BATCH  # ≈ 2667 µs per message (per env-step)

SAMPLE_SEED = 0
SCRIPTED_ENVS = 64


class CountingPolicy:
    """Wraps a policy and counts its ``generate`` calls (an independent check of the runner's
    own ``policy_calls``)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.calls = 0

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.calls += 1
        return self.inner.generate(prompts, sampling)

    def generate_privileged(
        self, prompts: Sequence[str], problems: Sequence[Problem], sampling: SamplingParams
    ) -> list[Generation]:
        """Forwards the problems to a privileged inner policy (a scripted expert)."""
        if not isinstance(self.inner, PrivilegedPolicy):
            return self.generate(prompts, sampling)
        self.calls += 1
        return self.inner.generate_privileged(prompts, problems, sampling)


@dataclass
class Row:
    """The medians of one configuration's timed rollouts."""

    section: str
    policy: str
    envs: int
    max_turns: int
    steps: int
    policy_calls: int
    policy_calls_by_agent: dict[str, int]
    counted_calls: int
    env_steps: int
    messages: int
    repeats: int
    setup_s: float
    wall_ms: float
    policy_ms: float
    overhead_us_per_env_step: float
    policy_share_pct: float
    calls_equal_steps: bool


def measure(
    section: str,
    label: str,
    env_fn: Callable[[], TeamEnv],
    policy: ConstantPolicy | CountingPolicy,
    n: int,
    repeats: int,
    failures: list[str],
) -> Row:
    """Warm-up once, then ``repeats`` timed rollouts of ``n`` problems; medians of each metric."""
    t0 = time.perf_counter()
    runner = Runner(env_fn, policy, progress=False)
    problems = runner.sample_problems(n, SAMPLE_SEED)
    runner.rollout(problems, group_size=1, seed=10_000)  # warm-up; fills the env pool
    setup_s = time.perf_counter() - t0
    max_turns = env_fn().protocol.turn_limit

    walls, pols, overheads, shares = [], [], [], []
    seen: set[tuple[int, int, int, int]] = set()
    by_agent: dict[str, int] = {}
    for r in range(repeats):
        calls_before = policy.calls
        batch = runner.rollout(problems, group_size=1, seed=r)
        stats = batch.stats
        wall = stats.wall_s
        counted = policy.calls - calls_before
        env_steps = n * stats.steps
        seen.add((stats.steps, stats.total_policy_calls, counted, stats.messages))
        by_agent = dict(stats.policy_calls)
        walls.append(wall * 1e3)
        pols.append(stats.policy_s * 1e3)
        overheads.append(stats.overhead_s / env_steps * 1e6)
        shares.append(100.0 * stats.policy_s / wall)
        ok = stats.total_policy_calls == stats.steps and counted == stats.steps
        if not ok:
            failures.append(
                f"{section} / {label} / envs={n} / seed={r}: {stats.total_policy_calls} policy calls "
                f"reported by the runner ({dict(stats.policy_calls)}) and {counted} counted by the "
                f"policy for {stats.steps} steps; a round-robin team must make exactly one call per "
                f"step (envs x steps would be {env_steps})."
            )
    if len(seen) != 1:
        failures.append(
            f"{section} / {label} / envs={n}: (steps, runner calls, counted calls, messages) "
            f"differ between repeats: {sorted(seen)}"
        )
    steps, calls, counted, messages = max(seen)
    return Row(
        section=section,
        policy=label,
        envs=n,
        max_turns=max_turns,
        steps=steps,
        policy_calls=calls,
        policy_calls_by_agent=by_agent,
        counted_calls=counted,
        env_steps=n * steps,
        messages=messages,
        repeats=repeats,
        setup_s=setup_s,
        wall_ms=statistics.median(walls),
        policy_ms=statistics.median(pols),
        overhead_us_per_env_step=statistics.median(overheads),
        policy_share_pct=statistics.median(shares),
        calls_equal_steps=calls == steps and counted == steps,
    )


def table(title: str, rows: Sequence[Row], with_policy: bool = False) -> Table:
    t = Table(title=title, title_justify="left")
    if with_policy:
        t.add_column("policy")
        t.add_column("max\nturns", justify="right")
    t.add_column("envs", justify="right")
    t.add_column("steps", justify="right")
    t.add_column("policy\ncalls", justify="right")
    t.add_column("env-steps\n(envs x steps)", justify="right")
    t.add_column("wall ms\n/rollout", justify="right")
    t.add_column("overhead µs\n/env-step", justify="right")
    t.add_column("policy\nshare %", justify="right")
    t.add_column("calls ==\nsteps", justify="center")
    for row in rows:
        cells = [
            str(row.envs),
            str(row.steps),
            str(row.policy_calls),
            str(row.env_steps),
            f"{row.wall_ms:.2f}",
            f"{row.overhead_us_per_env_step:.1f}",
            f"{row.policy_share_pct:.1f}",
            "[green]✓[/]" if row.calls_equal_steps else "[bold red]✗[/]",
        ]
        if with_policy:
            cells = [row.policy, str(row.max_turns), *cells]
        t.add_row(*cells)
    return t


def machine() -> dict[str, Any]:
    processor = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        processor = names[0] if names else processor
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "platform": platform.platform(),
        "processor": processor or "unknown",
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=positive_int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--task", default="teamtr/Arith-v0")
    parser.add_argument("--json", metavar="PATH", help="write the rows (and machine) as JSON")
    args = parser.parse_args(argv)

    console = Console(width=None if sys.stdout.isatty() else 140)
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    info = machine()
    console.print(f"[bold]command:[/] {command}")
    console.print(
        f"[bold]machine:[/] {info['platform']} | {info['processor']} | "
        f"{info['cpu_count']} CPUs ({info['usable_cpus']} usable) | {info['python']}"
    )
    console.print(
        f"[bold]task:[/] {args.task} | repeats: {args.repeats} (median) | "
        f"1 warm-up rollout per configuration\n"
    )

    task = args.task
    failures: list[str] = []

    constant_rows = []
    for n in args.envs:
        policy = ConstantPolicy("Answer: 1")
        constant_rows.append(
            measure(
                "constant",
                'ConstantPolicy("Answer: 1")',
                lambda: teamtr_env.make(task),
                policy,
                n,
                args.repeats,
                failures,
            )
        )
    console.print(
        table(
            f"1. Zero-cost policy ConstantPolicy('Answer: 1'), default team "
            f"({constant_rows[0].max_turns} turns, round robin)",
            constant_rows,
        )
    )

    scripted_rows = []
    for max_turns in (None, 6):
        overrides = {} if max_turns is None else {"max_turns": max_turns}
        expert = ScriptedExpert(teamtr_env.make(task, **overrides).task)
        scripted_rows.append(
            measure(
                "scripted",
                "ScriptedExpert",
                lambda overrides=overrides: teamtr_env.make(task, **overrides),
                CountingPolicy(expert),
                SCRIPTED_ENVS,
                args.repeats,
                failures,
            )
        )
    console.print()
    console.print(
        table(
            f"2. ScriptedExpert(env.task), 3-agent team, {SCRIPTED_ENVS} envs, "
            "one round (3 turns) and two rounds (max_turns=6)",
            scripted_rows,
            with_policy=True,
        )
    )

    console.print(
        "\n[bold]overhead µs/env-step[/] = RolloutStats.overhead_s / (envs x steps): the whole "
        "rollout() call (env resets, lockstep loop, episode records) minus the time inside generate()."
    )
    reference = next((r for r in constant_rows if r.envs == EST_BATCH), None)
    if reference is not None:
        loop_pct = 100 * reference.overhead_us_per_env_step / EST_MESSAGE_US
        console.print(
            f"\n[bold]Context (ESTIMATE, not a measurement):[/] at the stated ~{EST_TOKENS_PER_S:.0f} "
            f"tokens/s of a tiny model at batch {EST_BATCH}, one {EST_BATCH}-message x "
            f"{EST_TOKENS_PER_MESSAGE}-token step would take ≈{EST_STEP_MS:.0f} ms "
            f"(≈{EST_MESSAGE_US:.0f} µs per env-step). The overhead measured at {EST_BATCH} envs, "
            f"{reference.overhead_us_per_env_step:.1f} µs per env-step, "
            f"would be ≈{loop_pct:.2f}% of it. The 5% target against a real "
            "model's generation will be measured once model adapters exist."
        )

    if args.json:
        payload = {
            "command": command,
            "machine": info,
            "task": task,
            "estimate": {
                "tokens_per_s": EST_TOKENS_PER_S,
                "batch": EST_BATCH,
                "tokens_per_message": EST_TOKENS_PER_MESSAGE,
                "step_ms": EST_STEP_MS,
                "note": "stated throughput, not measured by this script",
            },
            "rows": [asdict(r) for r in (*constant_rows, *scripted_rows)],
            "failures": failures,
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=2)
        console.print(f"\nwrote {args.json}")

    if failures:
        console.print("\n[bold red]FAILED: policy calls != steps (the batching claim)[/]")
        for failure in failures:
            console.print(f"  - {failure}")
        return 1
    console.print("\n[green]OK:[/] policy calls == steps in every round-robin run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
