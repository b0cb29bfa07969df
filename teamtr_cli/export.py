"""``teamtr export RUN_DIR --out DIR``: a run's trained team as Hugging Face model and adapter
folders, a ``team.yaml`` that ``teamtr eval --team`` takes, and a manifest."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table


def add_parser(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser(
        "export",
        help="write a run's trained team as Hugging Face model / peft adapter folders, with a "
        "team.yaml for teamtr eval --team",
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the trained run (only read)")
    export.add_argument("--out", type=Path, required=True, help="the export folder (new or empty)")
    export.add_argument(
        "--checkpoint",
        default="latest",
        metavar="latest|best|stage_N",
        help="the newest intact stage (default), the best validation stage's team (best.pt), "
        "or stage N",
    )
    export.add_argument(
        "--merge",
        action="store_true",
        help="fold each LoRA agent's adapter into a full model folder (default: adapter folders)",
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier export in --out (any other non-empty folder is refused)",
    )


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from trainers.tools.export import export_run

    manifest = export_run(
        args.run_dir, args.out, args.checkpoint, merge=args.merge, overwrite=args.overwrite
    )
    for note in manifest.get("notes", []):
        console.print(f"warning: {note}", highlight=False, markup=False, style="yellow")
    stage = manifest["stage"]
    where = f"after stage {stage}" if stage is not None else "the best validation stage"
    table = Table(title=f"{args.run_dir} ({manifest['checkpoint_file']}, {where}) -> {args.out}")
    for col in ("agent", "written as", "folder", "base", "parameters"):
        table.add_column(col, justify="right" if col == "parameters" else "left")
    for name, agent in manifest["agents"].items():
        table.add_row(
            name,
            agent["kind"],
            agent["folder"] or "-",
            agent["base"] or "-",
            f"{agent['parameters']:,}",
        )
    console.print(table)
    console.print(
        f"evaluate it with: {manifest['eval_command']}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    return 0
