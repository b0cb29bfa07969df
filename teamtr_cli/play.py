"""``teamtr play``: one episode, its transcript printed."""

from __future__ import annotations

import argparse

from rich.console import Console

from teamtr_cli.common import add_env_args, team_runner
from teamtr_env.rollout import format_episode


def add_parser(sub: argparse._SubParsersAction) -> None:
    play = sub.add_parser("play", help="play one episode and print the transcript")
    add_env_args(play)


def cmd_play(args: argparse.Namespace, console: Console) -> int:
    runner = team_runner(args, progress=False)
    problem = runner.sample_problems(1, seed=args.seed)[0]
    batch = runner.rollout([problem], group_size=1, seed=args.seed)
    episode = batch.episodes[0]
    console.print(f"[bold]{args.task_id}[/] problem {episode.problem_id} (seed {args.seed})")
    console.print(format_episode(episode), markup=False, highlight=False)
    return 0
