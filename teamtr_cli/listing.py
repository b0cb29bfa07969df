"""``teamtr tasks`` and ``teamtr learners``: the registered task ids and learners."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from teamtr_cli.common import int_in, parse_option
from teamtr_cli.tables import add_prose_column, add_whole_column, print_whole
from teamtr_core.errors import ConfigError
from teamtr_env.registration import registry
from teamtr_env.splits import MAX_DRAWS

if TYPE_CHECKING:
    from trainers.learners.registry import LearnerSpec


def add_parsers(sub: argparse._SubParsersAction) -> None:
    tasks = sub.add_parser("tasks", help="list registered task ids with descriptions")
    tasks.add_argument(
        "pattern",
        nargs="?",
        default="",
        help="list only the ids that contain this text (e.g. reasoning_gym); with --splits, "
        "the one task to count",
    )
    tasks.add_argument(
        "--splits",
        action="store_true",
        help="count the distinct problems each split of the task generates (with its -o options)",
    )
    tasks.add_argument(
        "--draws",
        type=int_in(1, MAX_DRAWS),
        default=1000,
        help=f"problems drawn from each split by --splits (default 1000, at most {MAX_DRAWS})",
    )
    tasks.add_argument(
        "-o",
        dest="options",
        action="append",
        type=parse_option,
        default=[],
        metavar="KEY=VALUE",
        help="a task option for --splits (JSON value), e.g. -o curriculum_level=0; repeatable",
    )
    sub.add_parser("learners", help="list registered learners (teamtr train --learner ID)")


def cmd_tasks(console: Console, args: argparse.Namespace) -> int:
    """``teamtr tasks [PATTERN]``, or ``teamtr tasks ID --splits``."""
    if args.splits:
        return cmd_splits(console, args.pattern, args.draws, dict(args.options))
    return list_tasks(console, args.pattern)


def cmd_splits(console: Console, task_id: str, draws: int, options: dict[str, Any]) -> int:
    """The distinct problems each split of ``task_id`` generates in ``draws`` draws."""
    from rich.progress import Progress

    from teamtr_env.splits import count_split_problems

    if not task_id:
        raise ConfigError("teamtr tasks --splits", ["name the task: teamtr tasks ID --splits"])
    with Progress(console=console, transient=True, disable=draws < 10_000) as bar:
        job = bar.add_task("drawing problems", total=3 * draws)
        counts = count_split_problems(
            task_id, draws, progress=lambda done: bar.update(job, completed=done), **options
        )
    table = Table(title=f"{registry.spec(task_id).id}: distinct problems per split")
    for column in ("split", "draws", "distinct", "shared with another split", "holds"):
        table.add_column(column)
    for c in counts:
        holds = f"at least {c.distinct}" + (" (draws repeat: near its size)" if c.exhausted else "")
        table.add_row(c.split, str(c.draws), str(c.distinct), str(c.shared), holds)
    console.print(table)
    return 0


def list_tasks(console: Console, pattern: str = "") -> int:
    table = Table(title="Registered tasks")
    add_whole_column(table, "id", style="bold")  # copied into commands: never cut
    add_prose_column(table, "description")
    add_whole_column(table, "from")
    for task_id in registry:
        if pattern.lower() not in task_id.lower():
            continue
        spec = registry[task_id]
        description = escape(spec.description)
        reason = spec.unavailable_reason()
        if reason is not None:  # listed, with why it cannot run on this machine
            description = f"{description} [yellow]unavailable here: {escape(reason)}[/]"
        table.add_row(task_id, description, spec.plugin or spec.source or "built-in")
    print_whole(console, table)
    for err in registry.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0


def cmd_learners(console: Console) -> int:
    from trainers.learners.registry import ALIASES
    from trainers.learners.registry import registry as learners

    short = {v: k for k, v in ALIASES.items()}
    table = Table(title="Registered learners")
    add_whole_column(table, "id", style="bold")  # copied into --learner: never cut
    add_whole_column(table, "short name")
    add_prose_column(table, "description (learner_options)")
    add_whole_column(table, "from")
    for trainer_id in learners:
        spec = learners[trainer_id]
        options = _options(spec)
        what = spec.description + (f" (learner_options: {options})" if options else "")
        table.add_row(trainer_id, short.get(trainer_id, ""), what, _origin(spec))
    print_whole(console, table)
    for err in learners.plugin_errors:
        console.print(f"[yellow]warning:[/] {err}")
    return 0


def _options(spec: LearnerSpec) -> str:
    """A learner's own settings (``learner_options``) with their defaults, empty for none."""
    import dataclasses

    try:
        options = spec.load().options
    except Exception:  # a plugin that does not load: its error is printed below the table
        return "?"
    if options is None:
        return ""
    return ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(options))


def _origin(spec: LearnerSpec) -> str:
    """Where a learner comes from: its plugin's entry-point name, ``built-in``, or the module
    that registered its class (``register_learner`` in the user's code, e.g. by ``--import``)."""
    if spec.plugin:
        return str(spec.plugin)
    target = spec.entry_point
    module = target.partition(":")[0] if isinstance(target, str) else target.__module__
    return "built-in" if module.split(".")[0] == "trainers" else str(module)
