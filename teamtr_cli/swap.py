"""``teamtr swap``: one agent's model replaced in a trained run, optionally Stage-0 aligned, and
TeamTR resumed in a new run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamtr_cli.common import parse_option, positive_int
from teamtr_core.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    swap = sub.add_parser(
        "swap",
        help="replace one agent's model in a trained run (optionally Stage-0 aligned) and resume "
        "TeamTR in a new run directory",
    )
    swap.add_argument("run_dir", type=Path, help="the trained run (only read)")
    swap.add_argument("--agent", required=True, help="the agent whose model is replaced")
    swap.add_argument("--model", required=True, type=Path, help="the new model's directory")
    swap.add_argument("--out", type=Path, help="the new run directory (default RUN_DIR-swap-AGENT)")
    swap.add_argument("--stages", type=positive_int, default=4, help="TeamTR stages after the swap")
    swap.add_argument("--align", action="store_true", help="Stage-0 alignment before resuming")
    swap.add_argument("--probes", type=positive_int, default=500, help="P probe contexts")
    swap.add_argument("--delta-align", type=float, default=0.01, help="stop at this held-out KL")
    swap.add_argument("--align-steps", type=positive_int, default=200, help="at most this many")
    swap.add_argument("--align-lr", type=float, default=1e-3, help="alignment learning rate")
    swap.add_argument(
        "--align-direction",
        choices=["new_old", "old_new"],
        default="new_old",
        help="KL(new||old) on the new model's messages, or KL(old||new) on the old agent's",
    )
    swap.add_argument(
        "--protocol",
        type=parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a protocol setting the new model expects (system_prompt, reasoning, tool_calls, "
        "header; JSON values); it must equal the team's",
    )


def cmd_swap(args: argparse.Namespace, console: Console) -> int:
    from trainers.tools.align import AlignConfig
    from trainers.tools.swap import SwapConfig, swap_agent

    try:
        align = (
            AlignConfig(
                probes=args.probes,
                delta_align=args.delta_align,
                max_steps=args.align_steps,
                lr=args.align_lr,
                direction=args.align_direction,
            )
            if args.align
            else None
        )
    except ValueError as exc:
        raise ConfigError("teamtr swap", [str(exc)]) from None
    config = SwapConfig(
        str(args.run_dir),
        args.agent,
        str(args.model),
        out=None if args.out is None else str(args.out),
        stages=args.stages,
        align=align,
        protocol=dict(args.protocol),
    )
    record = swap_agent(config, console=console)
    console.print(f"swap record: {config.out_dir / 'swap.json'} (aligned: {record['aligned']})")
    return 0
