"""The ``teamtr`` command: the parser of every subcommand, and ``main``, which runs one and turns
the project's errors into one line and exit status 2."""

from __future__ import annotations

import argparse
import contextlib
import re
import warnings
from collections.abc import Sequence
from typing import NoReturn

from rich.console import Console

from teamtr_cli import (
    compare,
    diagnostics,
    export,
    listing,
    models,
    plan,
    play,
    serve,
    swap,
    train,
    user_modules,
)
from teamtr_cli import eval as evaluation
from teamtr_core.errors import TeamTRError

RENAMED = {"--trainer": "--learner", "--trainers": "--learners", "trainers": "learners"}
"""Flags and commands renamed since 0.1.0 (CHANGELOG.md): argparse refuses the old names, and the
error says the new one."""


class Parser(argparse.ArgumentParser):
    """argparse, whose usage errors name the new spelling of a renamed flag or command, and say
    where ``--import`` goes when it follows a subcommand."""

    def error(self, message: str) -> NoReturn:
        for old, new in RENAMED.items():
            if re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", message):
                message += f" ({old} was renamed {new}, see CHANGELOG.md: use {new})"
        unknown = message.startswith("unrecognized arguments")
        if unknown and re.search(r"(?<![\w-])--import(?![\w-])", message):
            # --import is the teamtr command's own option: a subcommand does not take it
            message += " (--import goes before the command: teamtr --import MODULE COMMAND ...)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``teamtr`` parser: each subcommand's module adds its own."""
    parser = Parser(prog="teamtr", description="Trainable, measurable multi-agent LLM teams.")
    user_modules.add_import_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    listing.add_parsers(sub)
    for command in (
        play,
        evaluation,
        train,
        plan,
        compare,
        swap,
        export,
        diagnostics,
        models,
        serve,
    ):
        command.add_parser(sub)
    return parser


def _quiet_libraries() -> None:
    """Keeps third-party noise (per-file loading bars, a peft deprecation) off the CLI's output."""
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``teamtr`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    _quiet_libraries()
    if args.command is None:
        parser.print_help()
        return 0
    try:
        user_modules.import_modules(args.imports)  # before the command reads a registry
        if args.command == "tasks":
            return listing.cmd_tasks(console, args)
        if args.command == "learners":
            return listing.cmd_learners(console)
        if args.command == "play":
            return play.cmd_play(args, console)
        if args.command == "models":
            return models.cmd_models(args, console)
        if args.command == "train":
            return train.cmd_train(args, console)
        if args.command == "plan":
            return plan.cmd_plan(args, console)
        if args.command == "compare":
            return compare.cmd_compare(args, console)
        if args.command == "swap":
            return swap.cmd_swap(args, console)
        if args.command == "export":
            return export.cmd_export(args, console)
        if args.command == "diagnostics":
            return diagnostics.cmd_diagnostics(args, console)
        if args.command == "serve":
            return serve.cmd_serve(args, console)
        return evaluation.cmd_eval(args, console)
    except (TeamTRError, OSError) as exc:  # user errors; any other exception is a bug
        err = Console(stderr=True, soft_wrap=True)  # no hard wraps: messages stay greppable
        err.print(f"error: {exc}", markup=False, highlight=False, style="red")
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback, the shell's status for SIGINT
        err = Console(stderr=True, soft_wrap=True)
        err.print(f"interrupted: {_interrupted(args)}", markup=False, highlight=False)
        return 130


def _interrupted(args: argparse.Namespace) -> str:
    """What an interrupted command leaves behind."""
    if args.command == "eval":
        done = getattr(args, "written", [])
        unwritten = [str(p) for p in (args.out, args.transcripts) if p and p not in done]
        return "the evaluation did not finish" + (
            f"; nothing was written to {' or '.join(unwritten)}" if unwritten else ""
        )
    if args.command == "train":
        return (
            "training stopped; what the run finished (logs, checkpoints) stays in its run directory"
        )
    if args.command == "export":
        return f"the export did not finish; nothing was written to {args.out}"
    return f"teamtr {args.command} stopped"
