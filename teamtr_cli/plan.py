"""``teamtr plan``: a training run's memory plan, per device and per agent, before anything is
loaded (``trainers.run.memory_plan``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from teamtr_cli.common import add_config_args
from teamtr_core.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser(
        "plan",
        help="the memory a training config needs on each device, per agent (nothing is loaded)",
        description="Adds up, per device and per agent, the bytes of the weights, gradients, "
        "optimizer state, trust-region snapshot, reference, activations and rollout engine a "
        "run holds (docs/scaling.md), and refuses (exit 2) a config that does not fit.",
    )
    add_config_args(plan, "plan_set", "override a config value (as teamtr train --set); repeatable")
    plan.add_argument(
        "--devices",
        metavar="NxSIZE",
        help="plan for GPUs you are not on, e.g. 8x80GiB (default: this machine's devices)",
    )
    plan.add_argument(
        "--host", metavar="SIZE", help="with --devices: the host's memory, e.g. 512GiB"
    )
    plan.add_argument(
        "--prompt-tokens",
        type=int,
        metavar="N",
        help="the longest context an agent scores, in tokens (default: measured on a few of the "
        "task's problems)",
    )
    plan.add_argument("--json", type=Path, help="write the plan here")


def cmd_plan(args: argparse.Namespace, console: Console) -> int:
    from trainers.run.checks import env_factory
    from trainers.run.config_file import load_train_config
    from trainers.run.memory_plan import parse_devices, parse_size, plan_memory

    if args.host and not args.devices:
        raise ConfigError("plan", ["--host goes with --devices (this machine's host is known)"])
    if args.prompt_tokens is not None and args.prompt_tokens < 1:
        raise ConfigError("plan", [f"--prompt-tokens must be >= 1, got {args.prompt_tokens}"])
    config = load_train_config(args.config, args.plan_set)
    devices = None
    if args.devices:
        devices = parse_devices(args.devices, parse_size(args.host) if args.host else None)
    env = env_factory(config, "train")()
    plan = plan_memory(config, env, devices, prompt_tokens=args.prompt_tokens)
    console.print(plan_table(plan))
    console.print(device_table(plan))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(plan.to_dict(), indent=1) + "\n")
        console.print(f"plan written to {args.json}")
    errors = plan.errors()
    if errors:
        raise ConfigError("memory plan", errors)
    console.print("every device holds its plan", highlight=False)
    return 0


def plan_table(plan: object) -> Table:
    """One row per agent (rank): where it is and what it holds; GiB, or MiB for a small plan."""
    from trainers.run.memory_plan import MemoryPlan

    assert isinstance(plan, MemoryPlan)
    largest = max((p.peak for p in plan.placed), default=0)
    unit, scale = ("GiB", 2**30) if largest >= 2**30 else ("MiB", 2**20)
    table = Table(title=f"memory plan ({unit}): what each agent holds, and an update's peak")
    columns = (
        "device",
        "agent",
        "weights",
        "grads",
        "optim",
        "snap",
        "ref",
        "activ",
        "engine",
        "peak",
    )
    for column in columns:
        left = column in ("device", "agent")
        table.add_column(column, justify="left" if left else "right", overflow="fold")
    for p in plan.placed:
        b = p.bytes
        cells = (
            b.weights,
            b.gradients,
            b.optimizer,
            b.snapshot,
            b.reference,
            b.activations,
            b.engine,
            p.peak,
        )
        table.add_row(p.device, p.label, *(f"{c / scale:,.1f}" for c in cells))
    return table


def device_table(plan: object) -> Table:
    """Each device's plan against its capacity."""
    from trainers.run.memory_plan import MemoryPlan

    assert isinstance(plan, MemoryPlan)
    table = Table(title="per device (GiB): every agent held, the largest update, process overheads")
    for column in ("device", "capacity", "plan", "verdict"):
        table.add_column(column, justify="left" if column in ("device", "verdict") else "right")
    for name, device in plan.devices.items():
        if not plan.on(name):
            continue
        used, cap = plan.used(name), device.capacity
        verdict = "fits" if cap is None or used <= cap else f"short by {(used - cap) / 2**30:,.2f}"
        capacity = "unknown" if cap is None else f"{cap / 2**30:,.2f}"
        table.add_row(name, capacity, f"{used / 2**30:,.2f}", verdict)
    return table
