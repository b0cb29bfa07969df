"""What the memory plan (:mod:`trainers.run.memory_plan`) needs of each agent: its model's shape
(a team config's model folder's ``config.json``, checked; else the tiny model's spec), its dtype,
what it trains and on which device its team config puts it. Nothing is loaded.

A folder without a ``config.json`` or one that is not a Llama-shaped decoder's is not planned
(its memory is not counted, and the plan says so); an invalid one is refused, every problem of
every file at once (:func:`trainers.run.memory_model.config_errors`). For ``teamtr plan``
(``bundled=True``) a model path that is not on this machine is planned from the config.json
teamtr keeps of the model it names (:mod:`trainers.run.bundled_models`), and refused when it
names none; a run (``teamtr train``'s check) needs the model's folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.gguf import is_gguf_path
from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
from trainers.run.bundled_models import BUNDLED, bundled_folder, bundled_model, bundled_names
from trainers.run.memory_model import REQUIRED_FIELDS, ModelShape, read_config

__all__ = ["PlannedAgent", "plan_agents"]


@dataclass(frozen=True)
class PlannedAgent:
    """What the plan needs of one agent: its model's shape and how it trains."""

    name: str
    shape: ModelShape
    dtype: str
    trainable: int
    lora: bool
    device: str
    trains: bool
    shared_base: bool = False
    bundled: str | None = None
    """The hub id of the bundled ``config.json`` its shape comes from (``None``: its own)."""
    tokenizer: str | None = None
    """Its model folder when that holds a tokenizer: the plan counts the agent's prompts in its
    tokens, rendered as its policy renders them (``None``: estimated from characters)."""
    chat_template: bool | None = None
    """The agent's ``chat_template`` setting (``None``: when the tokenizer has one)."""


def plan_agents(
    config: TrainConfig, names: Sequence[str], *, bundled: bool = False
) -> tuple[list[PlannedAgent], dict[str, str]]:
    """Each agent's shape and training (a team config's models; else the tiny model), and the
    agents whose size is not known (``MemoryPlan.unplanned``); a shared policy
    (``team.shared_policy``) is one entry, named by its agents (``a+b+c``). ``bundled``: a
    model path not on this machine is planned from teamtr's bundled ``config.json`` of the
    model it names (``teamtr plan``; a run needs the folder, and its check leaves this off).

    Raises:
        ConfigError: the team config's problems (a model path that is not a folder, without
            ``bundled``), every invalid ``config.json``, and (with ``bundled``) every path that
            is not here and names no bundled model; all at once.
    """
    if config.team is None:
        from adapters.tiny import TinyModelSpec

        shape = _tiny_shape(config.tiny_model or TinyModelSpec())
        tiny = [
            PlannedAgent(a, shape, "float32", shape.parameters, False, "cpu", True) for a in names
        ]
        return tiny, {}
    from adapters.team import check_team

    out = []
    chosen = check_team(config.team, list(names), model_folders=not bundled)
    shapes, unplanned = _shapes(chosen, bundled)
    for name, (shape, hub) in shapes.items():
        agent = chosen[name]
        dtype = shape.dtype if agent.dtype == "auto" else agent.dtype
        lora = agent.lora is not None or agent.adapter_path is not None
        trainable = (
            shape.lora_parameters(agent.lora.r, agent.lora.target_modules)
            if agent.lora is not None
            else shape.parameters
        )
        device = "cuda:0" if agent.device == "cuda" else agent.device
        trains = agent.backend == "hf"
        out.append(
            PlannedAgent(
                name,
                shape,
                dtype,
                trainable,
                lora,
                device,
                trains,
                config.team.shared_base,
                hub,
                None if hub else _tokenizer_folder(agent.path),
                agent.chat_template,
            )
        )
    planned = {a.name: a for a in out}
    merged = []
    for slot in config.team.slots([a.name for a in out]):  # one model and optimizer per slot
        first = planned[slot[0]]
        merged.append(first if len(slot) == 1 else dataclasses.replace(first, name="+".join(slot)))
    return merged, unplanned


def _tokenizer_folder(path: str | None) -> str | None:
    """``path`` when it is a model folder here with a tokenizer (``tokenizer.json`` or
    ``tokenizer_config.json``), else ``None``."""
    if not path or not Path(path).is_dir():
        return None
    names = ("tokenizer.json", "tokenizer_config.json")
    return path if any((Path(path) / n).is_file() for n in names) else None


def _shapes(
    chosen: dict[str, Any], bundled: bool
) -> tuple[dict[str, tuple[ModelShape, str | None]], dict[str, str]]:
    """The model shape of each agent with a model path (and the hub id of the bundled config it
    came from, if any), and why the others' sizes are not known (a folder without a
    ``config.json``; one not of a Llama-shaped model). Each path is read once.

    Raises:
        ConfigError: every invalid ``config.json``'s problems at once, naming file and field,
            and each path the plan cannot read (:func:`_locate`), naming its agents.
    """
    by_path: dict[str, list[str]] = {}
    for name, agent in chosen.items():
        if agent.backend in ("hf", "vllm") and agent.path:  # model-free agents hold nothing
            by_path.setdefault(agent.path, []).append(name)
    shapes: dict[str, tuple[ModelShape, str | None]] = {}
    unplanned: dict[str, str] = {}
    errors: list[str] = []
    for path, names in by_path.items():
        try:
            folder, hub = _locate(path, names) if bundled else (path, None)
            found = _shape(folder)
        except ConfigError as exc:
            errors += exc.errors
            continue
        for name in names:
            if isinstance(found, ModelShape):
                shapes[name] = (found, hub)
            else:
                unplanned[name] = found
    if errors:
        raise ConfigError("memory plan", errors)
    return shapes, unplanned


def _locate(path: str, agents: list[str]) -> tuple[str, str | None]:
    """The folder whose ``config.json`` gives ``path``'s sizes (``path`` itself when it is a
    folder here; else the bundled config of the model it names), and that config's hub id.

    Raises:
        ConfigError: ``path`` is a file, or is not here and names no bundled model: what the
            plan takes, with the bundled names.
    """
    here = Path(path)
    if here.is_dir() or (is_gguf_path(path) and here.is_file()):  # .gguf: _shape reads it
        return path, None
    whose = f"team: {path} (the model of {', '.join(agents)})"
    if here.exists():
        raise ConfigError(
            "memory plan", [f"{whose} is a file: give the folder that holds its config.json"]
        )
    name = bundled_model(path)
    if name is None:
        raise ConfigError(
            "memory plan",
            [
                f"{whose} is not on this machine, and names no model whose config.json teamtr "
                "keeps. teamtr plan needs only a model's sizes: give the model's folder, a "
                "folder holding just its config.json (as benchmarks/configs/qwen3-8b does), or "
                f"the name of a model teamtr keeps a config.json of: {bundled_names()} (as a "
                "hub id, e.g. --set team.default.path=Qwen/Qwen3-8B, or a path ending in the "
                "name)"
            ],
        )
    return str(bundled_folder(name)), BUNDLED[name]


def _shape(path: str) -> ModelShape | str:
    """The shape in ``path``'s ``config.json``, or why its size is not known (not an error: the
    run loads such a model in its own way)."""
    if is_gguf_path(path):
        return _gguf_shape(path)
    try:
        data = read_config(path)
    except FileNotFoundError as exc:
        return f"{exc}: not found (a folder without it): its memory is not counted"
    file = Path(path) / "config.json"
    if isinstance(data, dict) and not any(key in data for key in REQUIRED_FIELDS):
        return (  # another architecture's names (GPT-2's n_embd, ...); one of them: a typo
            f"{file} has none of {', '.join(REQUIRED_FIELDS)} (not a Llama-shaped decoder the "
            "plan knows): its memory is not counted"
        )
    return ModelShape.from_config(data, str(file))


def _gguf_shape(path: str) -> ModelShape | str:
    """The shape of a ``.gguf`` file's model (issue #59): from its converted folder's
    ``config.json`` when the cache has it, else from the file's metadata
    (:func:`adapters.gguf.gguf_model_config`; no weight is read), or why it is not known."""
    from adapters.gguf import ModelSourceError, gguf_model_config

    try:
        data = gguf_model_config(path)
    except ModelSourceError as exc:
        return f"{exc}: its memory is not counted"
    return ModelShape.from_config(data, path)


def _tiny_shape(spec: Any) -> ModelShape:
    from adapters.tiny import SPECIAL_TOKENS

    vocab = len(spec.charset) + len(SPECIAL_TOKENS)
    return ModelShape(
        hidden=spec.hidden_size,
        layers=spec.num_layers,
        intermediate=spec.intermediate_size,
        vocab=vocab,
        heads=spec.num_heads,
        kv_heads=spec.num_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_positions=spec.max_positions,
    )
