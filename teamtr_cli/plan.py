"""``teamtr plan``: a training run's memory plan, per device and per agent, before anything is
loaded (``trainers.run.memory_plan``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from teamtr_cli.common import add_config_args
from teamtr_cli.tables import add_whole_column, print_whole
from teamtr_core.errors import ConfigError
from teamtr_core.paths import unwritable_file

if TYPE_CHECKING:
    from trainers.run.plan_devices import Device


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
    from trainers.run.memory_plan import plan_memory

    devices, errors = _read_flags(args)
    if errors:  # every flag's problem at once, before the config is read or anything planned
        raise ConfigError("plan", errors)
    config = load_train_config(args.config, args.plan_set)
    env = env_factory(config, "train")()
    plan = plan_memory(config, env, devices, prompt_tokens=args.prompt_tokens, bundled=True)
    bundled: dict[str, list[str]] = {}
    for agent, hub in plan.bundled.items():
        bundled.setdefault(hub, []).append(agent)
    for hub, agents in bundled.items():  # said first: these sizes are not read from the path
        console.print(
            f"{', '.join(agents)}: planned from teamtr's bundled config.json of "
            f"{hub.rsplit('/', 1)[-1]} ({hub}; the model's folder is not on this machine)",
            highlight=False,
        )
    print_whole(console, plan_table(plan))
    print_whole(console, device_table(plan))
    unplanned: dict[str, list[str]] = {}
    for agent, reason in plan.unplanned.items():
        unplanned.setdefault(reason, []).append(agent)
    for reason, agents in unplanned.items():
        console.print(f"[yellow]warning:[/] not planned: {', '.join(agents)}: {reason}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(plan.to_dict(), indent=1) + "\n")
        console.print(f"plan written to {args.json}")
    errors = plan.errors()
    if errors:
        raise ConfigError("memory plan", errors)
    notes = []  # said, so that "holds" is not read as checked
    unknown = [n for n, d in plan.devices.items() if d.capacity is None and plan.on(n)]
    if unknown:
        hint = "; --host SIZE gives the host's" if "cpu" in unknown and args.devices else ""
        notes.append(f"{', '.join(unknown)} not checked: capacity unknown{hint}")
    if plan.unplanned:
        notes.append(f"{len(plan.unplanned)} agent(s) not planned, see above")
    done = f" ({'; '.join(notes)})" if notes else ""
    console.print(f"every device holds its plan{done}", highlight=False)
    return 0


def _read_flags(args: argparse.Namespace) -> tuple[dict[str, Device] | None, list[str]]:
    """The devices of ``--devices`` and ``--host`` (``None``: this machine's), and every
    problem of the flags: sizes and counts out of range, ``--prompt-tokens`` below 1, a
    ``--json`` file that could not be written (checked before the plan is computed)."""
    from trainers.run.plan_devices import parse_devices, parse_size

    errors = []
    if args.host and not args.devices:
        errors.append("--host goes with --devices (this machine's host is known)")
    if args.prompt_tokens is not None and args.prompt_tokens < 1:
        errors.append(f"--prompt-tokens must be >= 1, got {args.prompt_tokens}")
    host = devices = None
    if args.host:
        try:
            host = parse_size(args.host, "--host")
        except ConfigError as exc:
            errors += exc.errors
    if args.devices:
        try:
            devices = parse_devices(args.devices, host)
        except ConfigError as exc:
            errors += exc.errors
    problem = unwritable_file(args.json) if args.json else None
    if problem:
        errors.append(f"--json {args.json}: {problem}; give a file in a folder you can write to")
    return devices, errors


def plan_table(plan: object) -> Table:
    """One row per agent (rank): where it is and what it holds; GiB, or MiB for a small plan."""
    from trainers.run.memory_plan import MemoryPlan

    assert isinstance(plan, MemoryPlan)
    largest = max((p.peak for p in plan.placed), default=0)
    unit, scale = ("GiB", 2**30) if largest >= 2**30 else ("MiB", 2**20)
    table = _narrow_table(f"memory plan ({unit}): what each agent holds, and an update's peak")
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
    # Only the agent's label wraps, at a space ("aggregator (rank 1)"): never inside a name.
    longest = max((len(word) for p in plan.placed for word in p.label.split()), default=5)
    for column in columns:
        if column == "agent":
            table.add_column(column, overflow="fold", min_width=longest)
        else:
            add_whole_column(table, column, justify="left" if column == "device" else "right")
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
    table = _narrow_table(
        "per device (GiB): every agent held, the largest update, process overheads"
    )
    for column in ("device", "capacity", "plan", "verdict"):
        left = column in ("device", "verdict")
        add_whole_column(table, column, justify="left" if left else "right")
    for name, device in plan.devices.items():
        if not plan.on(name):
            continue
        used, cap = plan.used(name), device.capacity
        if cap is None:
            verdict = "not checked"  # an unknown capacity shows nothing about fitting
        else:
            verdict = "fits" if used <= cap else f"short by {(used - cap) / 2**30:,.2f}"
        capacity = "unknown" if cap is None else f"{cap / 2**30:,.2f}"
        table.add_row(name, capacity, f"{used / 2**30:,.2f}", verdict)
    return table


def _narrow_table(title: str) -> Table:
    """A table that spends two characters between columns and none on its edges, so that ten
    columns of whole headers and numbers fit 80 characters (a pipe, CI, a notebook)."""
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
