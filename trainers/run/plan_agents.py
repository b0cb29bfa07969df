"""What the memory plan (:mod:`trainers.run.memory_plan`) needs of each agent: its model's shape
(a team config's model folder's ``config.json``, checked; else the tiny model's spec), its dtype,
what it trains and on which device its team config puts it. Nothing is loaded.

A folder without a ``config.json`` (a hub id) or one that is not a Llama-shaped decoder's is
not planned (its memory is not counted, and the plan says so); an invalid one is refused,
every problem of every file at once (:func:`trainers.run.memory_model.config_errors`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamtr_core.errors import ConfigError
from trainers.config import TrainConfig
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


def plan_agents(
    config: TrainConfig, names: Sequence[str]
) -> tuple[list[PlannedAgent], dict[str, str]]:
    """Each agent's shape and training (a team config's models; else the tiny model), and the
    agents whose size is not known (``MemoryPlan.unplanned``); a shared policy
    (``team.shared_policy``) is one entry, named by its agents (``a+b+c``)."""
    if config.team is None:
        from adapters.tiny import TinyModelSpec

        shape = _tiny_shape(config.tiny_model or TinyModelSpec())
        tiny = [
            PlannedAgent(a, shape, "float32", shape.parameters, False, "cpu", True) for a in names
        ]
        return tiny, {}
    from adapters.team import check_team

    out = []
    chosen = check_team(config.team, list(names))
    shapes, unplanned = _shapes(chosen)
    for name, shape in shapes.items():
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
                name, shape, dtype, trainable, lora, device, trains, config.team.shared_base
            )
        )
    if config.team.shared_policy and out:  # role-sharing: one model and optimizer for them all
        return [dataclasses.replace(out[0], name="+".join(a.name for a in out))], unplanned
    return out, unplanned


def _shapes(chosen: dict[str, Any]) -> tuple[dict[str, ModelShape], dict[str, str]]:
    """The model shape of each agent with a model folder, and why the others' sizes are not
    known (a path without a ``config.json``, e.g. a hub id; one not of a Llama-shaped model).
    Each folder is read once.

    Raises:
        ConfigError: every invalid ``config.json``'s problems at once, naming file and field.
    """
    shapes: dict[str, ModelShape] = {}
    unplanned: dict[str, str] = {}
    errors: list[str] = []
    read: dict[str, ModelShape | str | None] = {}
    for name, agent in chosen.items():
        if agent.backend not in ("hf", "vllm") or not agent.path:
            continue  # model-free agents hold nothing worth planning
        if agent.path not in read:
            read[agent.path] = None
            try:
                read[agent.path] = _shape(agent.path)
            except ConfigError as exc:
                errors += exc.errors
        found = read[agent.path]
        if isinstance(found, ModelShape):
            shapes[name] = found
        elif found is not None:
            unplanned[name] = found
    if errors:
        raise ConfigError("memory plan", errors)
    return shapes, unplanned


def _shape(path: str) -> ModelShape | str:
    """The shape in ``path``'s ``config.json``, or why its size is not known (not an error: the
    run loads such a model in its own way)."""
    try:
        data = read_config(path)
    except FileNotFoundError as exc:
        return f"{exc}: not found (a hub id, or a folder without it): its memory is not counted"
    file = Path(path) / "config.json"
    if isinstance(data, dict) and not any(key in data for key in REQUIRED_FIELDS):
        return (  # another architecture's names (GPT-2's n_embd, ...); one of them: a typo
            f"{file} has none of {', '.join(REQUIRED_FIELDS)} (not a Llama-shaped decoder the "
            "plan knows): its memory is not counted"
        )
    return ModelShape.from_config(data, str(file))


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
