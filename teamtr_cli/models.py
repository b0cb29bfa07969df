"""``teamtr models build-tiny PATH``: a tiny char-level Llama and its tokenizer, saved offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from teamtr_cli.common import non_negative_int
from teamtr_core.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    models = sub.add_parser("models", help="build local models")
    models_sub = models.add_subparsers(dest="models_command", metavar="ACTION")
    tiny = models_sub.add_parser(
        "build-tiny", help="build a tiny char-level Llama + tokenizer, saved offline"
    )
    tiny.add_argument("path", type=Path, help="output directory")
    tiny.add_argument("--hidden-size", type=int, default=128)
    tiny.add_argument("--layers", type=int, default=2)
    tiny.add_argument("--heads", type=int, default=4)
    tiny.add_argument("--intermediate-size", type=int, default=512)
    tiny.add_argument("--max-positions", type=int, default=1024)
    tiny.add_argument("--seed", type=non_negative_int, default=0)


def cmd_models(args: argparse.Namespace, console: Console) -> int:
    if args.models_command != "build-tiny":
        raise ConfigError("models", ["expected an action: teamtr models build-tiny PATH"])
    from adapters.tiny import TinyModelSpec, build_tiny_model

    try:
        spec = TinyModelSpec(
            hidden_size=args.hidden_size,
            num_layers=args.layers,
            num_heads=args.heads,
            intermediate_size=args.intermediate_size,
            max_positions=args.max_positions,
            seed=args.seed,
        )
    except ValueError as exc:  # the flags are the user's input
        raise ConfigError("teamtr models build-tiny", [str(exc)]) from exc
    path = build_tiny_model(args.path, spec)
    console.print(f"tiny model written to {path} (load it with HFPolicy.from_pretrained)")
    return 0
