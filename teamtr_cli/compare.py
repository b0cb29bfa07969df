"""``teamtr compare``: benchmark learners on one task at an equal budget (``trainers.tools.compare``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamtr_cli.common import non_negative_int
from teamtr_core.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    compare = sub.add_parser(
        "compare",
        help="benchmark learners on one task at an equal budget, paired by seed",
        description="Trains every learner on every seed from one shared behaviour-cloned "
        "start, at the same budget per update, and reports held-out avg@K with paired "
        "differences against the first learner (bootstrap CIs over seeds and problems). "
        "Rerunning the same command continues an interrupted comparison.",
    )
    compare.add_argument("task", metavar="TASK", help="a registered task id (teamtr tasks)")
    compare.add_argument(
        "--learners",
        dest="learners",
        nargs="+",
        required=True,
        metavar="ID",
        help="learner ids or short names (teamtr learners), or variants with settings of their "
        "own, [LABEL=]NAME:KEY=VALUE[,KEY=VALUE...] (e.g. "
        "no-radius=teamtr:trust_region.delta_mode=none); the first is the reference",
    )
    compare.add_argument(
        "--seeds",
        nargs="+",
        type=non_negative_int,
        default=[0, 1, 2],
        metavar="S",
        help="default: 0 1 2",
    )
    compare.add_argument("--config", type=Path, help="a training config (YAML/JSON)")
    compare.add_argument(
        "--set",
        dest="compare_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value for every run (as teamtr train --set); repeatable",
    )
    compare.add_argument("--quick", action="store_true", help="a smoke comparison in minutes")
    compare.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the seeds in parallel on Ray (a local Ray, or the cluster at ADDRESS)",
    )
    compare.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the output directory: new or empty, or holding this comparison (then it continues)",
    )
    compare.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the comparison already in --out (any other non-empty folder is refused)",
    )


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from trainers.tools.compare import CompareSpec, compare

    imports = getattr(args, "imports", [])
    if args.ray is not None and imports:  # a Ray worker is a new process: it never ran --import
        raise ConfigError(
            "teamtr compare --ray",
            [
                f"--import {' '.join(imports)} registers in this process only, and the seeds of "
                "--ray run in Ray's worker processes, which do not import it: install the module "
                "as a plugin (an entry point of the teamtr.learners or teamtr_env.tasks group, "
                "docs/adding-a-trainer.md#a-complete-plugin-package), or leave out --ray"
            ],
        )
    spec = CompareSpec(
        task=args.task,
        learners=tuple(args.learners),
        seeds=tuple(args.seeds),
        out=args.out,
        config_file=args.config,
        overrides=tuple(args.compare_set),
        quick=args.quick,
        ray=args.ray is not None,
        ray_address=args.ray or None,
        overwrite=args.overwrite,
    )
    compare(spec, console=console)
    return 0
