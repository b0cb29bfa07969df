"""``teamtr train``: a training run from a config file and overrides (no arguments: the CPU demo)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from teamtr_cli.common import add_config_args
from teamtr_core.config_schema import json_schema


def add_parser(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="train a team (no arguments: the CPU demo, TeamTR on tiny models)"
    )
    add_config_args(
        train,
        "train_set",
        "override a config value, e.g. --set schedule.learner=naive_sequential; repeatable",
    )
    train.add_argument(
        "--learner",
        metavar="ID",
        help="the learner: a registered id (teamtr learners) or short name; same as "
        "--set schedule.learner=ID",
    )
    train.add_argument("--run-dir", help="where logs, checkpoints and the summary go")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --run-dir after its last intact checkpoint, with its own "
        "config.yaml (a --config or --set that changes the results is refused)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in --run-dir (its files are deleted first); without it "
        "a non-empty run directory is refused",
    )
    train.add_argument("--schema", action="store_true", help="print the config's JSON Schema")


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    from trainers import train
    from trainers.config import TrainConfig

    if args.schema:
        console.print_json(json.dumps(json_schema(TrainConfig)))
        return 0
    overrides = list(args.train_set) + ([f"run_dir={args.run_dir}"] if args.run_dir else [])
    if args.learner:
        overrides.append(f"schedule.learner={args.learner}")
    saved = Path(args.run_dir or TrainConfig().run_dir) / "config.yaml"
    path = args.config
    if path is None and args.resume and saved.exists():  # a resume continues with its own config
        path = saved
    # one rule with or without a file; the path Python's trainers.train takes
    train(path, overrides=overrides, resume=args.resume, overwrite=args.overwrite, console=console)
    return 0
