"""``teamtr tasks`` and ``teamtr learners``: the registered task ids and learners."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from teamtr_env.registration import registry


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("tasks", help="list registered task ids with descriptions")
    sub.add_parser(
        "learners",
        aliases=["trainers"],  # the old name, still accepted with a notice
        help="list registered learners (teamtr train --learner ID)",
    )


def cmd_tasks(console: Console) -> int:
    table = Table(title="Registered tasks")
    table.add_column("id", style="bold")
    table.add_column("description")
    table.add_column("from")
    for task_id in registry:
        spec = registry[task_id]
        table.add_row(task_id, spec.description, spec.plugin or "built-in")
    console.print(table)
    for err in registry.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0


def cmd_learners(console: Console) -> int:
    from trainers.registry import ALIASES
    from trainers.registry import registry as learners

    short = {v: k for k, v in ALIASES.items()}
    table = Table(title="Registered learners")
    table.add_column("id", style="bold")
    table.add_column("short name")
    table.add_column("description")
    table.add_column("from")
    for trainer_id in learners:
        spec = learners[trainer_id]
        table.add_row(
            trainer_id, short.get(trainer_id, ""), spec.description, spec.plugin or "built-in"
        )
    console.print(table)
    for err in learners.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0
