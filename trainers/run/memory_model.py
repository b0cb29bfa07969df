"""How many bytes one agent's update holds, from its model's architecture alone (a ``config.json``
or the tiny model's spec: no weights are loaded), pure arithmetic for :mod:`trainers.run.memory_plan`.
A ``config.json`` is checked before it is used (:func:`config_errors`): every size a positive
integer within :data:`CONFIG_LIMITS`, every problem at once, naming the file and the field.

The model is a decoder-only transformer in Llama's shape (Llama, Qwen2/3, Mistral): embeddings,
``layers`` blocks of attention (``heads`` query and ``kv_heads`` key/value heads of
``head_dim``) and a gated MLP of width ``intermediate``, a final norm and an LM head (tied or
not). An update's peak (:func:`update_peak`) is the larger of two moments:

- the backward pass: weights, optimizer state, gradients and the activations of one micro-batch
  (plus the trust region's snapshot from the second epoch on);
- the optimizer step: weights, optimizer state, gradients and the snapshot (taken just before
  the first step, once the first epoch's activations are freed).

Activations follow eager attention in float32 (the tiny and the benchmark models): per token,
about ``16 * hidden + 6 * intermediate`` values a layer, plus the logits (three copies of
``vocab`` values: logits, their log-softmax and its gradient).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamtr_core.errors import ConfigError

__all__ = [
    "CONFIG_LIMITS",
    "DTYPE_BYTES",
    "REQUIRED_FIELDS",
    "ModelShape",
    "UpdateBytes",
    "config_errors",
    "read_config",
    "update_peak",
]

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of each weight dtype an agent may load in."""

_CONFIG_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}

CONFIG_LIMITS = {
    "hidden_size": 2**20,
    "num_hidden_layers": 10_000,
    "intermediate_size": 2**22,
    "vocab_size": 2**24,
    "num_attention_heads": 2**14,
    "num_key_value_heads": 2**14,
    "head_dim": 2**14,
    "max_position_embeddings": 2**30,
}
"""The ``config.json`` sizes the plan reads, each a positive integer up to its limit (far above
any published model's: a value beyond is a typo, and would plan a device of exabytes)."""

REQUIRED_FIELDS = ("hidden_size", "num_hidden_layers", "vocab_size")
"""The fields without a default: a ``config.json`` without them is not of a Llama-shaped model."""


def _seen(value: Any) -> str:
    """A value as the JSON file wrote it (cut to 40 characters), with its type where that is
    the problem."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    text = json.dumps(value)
    text = text if len(text) <= 40 else f"{text[:40]}... ({len(text):,} characters)"
    kind = {bool: " (true/false)", float: " (a float)", str: " (a string)"}.get(type(value), "")
    return text + kind


def config_errors(data: Any) -> list[str]:
    """Why ``data`` (a ``config.json``'s fields) gives no model shape, one line per field (empty:
    it does): every size in :data:`CONFIG_LIMITS` a positive integer within its limit (JSON
    floats such as ``1e9`` and booleans refused), :data:`REQUIRED_FIELDS` present,
    ``tie_word_embeddings`` a boolean, the dtype a string, and as many query heads as
    key/value heads or more."""
    if not isinstance(data, dict):
        return [f"expected a JSON object of the model's settings, got {_seen(data)}"]
    errors = [
        f"{key}: missing; a Llama-shaped model's config.json gives it"
        for key in REQUIRED_FIELDS
        if key not in data
    ]
    for key, limit in CONFIG_LIMITS.items():
        value = data.get(key)
        optional = key not in REQUIRED_FIELDS and value is None  # null: the default
        if key not in data or optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            errors.append(
                f"{key}: expected a whole number from 1 to {limit:,}, got {_seen(value)}; "
                "fix the model's config.json (the plan reads its sizes from it)"
            )
    tied = data.get("tie_word_embeddings")
    if tied is not None and not isinstance(tied, bool):
        errors.append(f"tie_word_embeddings: expected true or false, got {_seen(tied)}")
    for key in ("torch_dtype", "dtype"):
        if data.get(key) is not None and not isinstance(data[key], str):
            errors.append(f"{key}: expected a dtype name such as bfloat16, got {_seen(data[key])}")
    if not errors:
        errors += _head_errors(data)
    return errors


def _head_errors(data: dict[str, Any]) -> list[str]:
    """Heads that leave no width to a head: more key/value heads than query heads, or more
    query heads than ``hidden_size`` with no ``head_dim`` (each head's width is their ratio)."""
    hidden, heads = data["hidden_size"], data.get("num_attention_heads")
    kv = data.get("num_key_value_heads")
    errors = []
    if heads and kv and kv > heads:
        errors.append(
            f"num_key_value_heads: expected at most num_attention_heads ({heads}), got {kv}"
        )
    if heads and not data.get("head_dim") and heads > hidden:
        errors.append(
            f"num_attention_heads: expected at most hidden_size ({hidden}) with no head_dim, "
            f"got {heads}"
        )
    return errors


def read_config(folder: str | Path) -> Any:
    """The parsed ``config.json`` of a model folder.

    Raises:
        FileNotFoundError: the folder has no ``config.json`` (or is not a folder).
        ConfigError: a ``config.json`` that cannot be read or is not JSON, naming the file.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(str(path))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(path), [f"{path}: cannot be read ({exc.strerror or exc})"]) from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, an int of 5,000 digits
        raise ConfigError(
            str(path), [f"{path}: is not a JSON file ({exc}); give the model's config.json"]
        ) from None


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's sizes (a ``config.json``'s fields)."""

    hidden: int
    layers: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool = False
    max_positions: int = 2048
    dtype: str = "float32"

    @classmethod
    def from_config(cls, data: Any, source: str = "config.json") -> ModelShape:
        """From a transformers ``config.json``'s fields (missing optional ones take Llama's
        defaults), every field checked first (:func:`config_errors`).

        Raises:
            ConfigError: every problem of the fields at once, each naming ``source``.
        """
        errors = config_errors(data)
        if errors:
            raise ConfigError(source, [f"{source}: {e}" for e in errors])
        hidden = data["hidden_size"]
        heads = data.get("num_attention_heads") or max(hidden // 128, 1)
        return cls(
            hidden=hidden,
            layers=data["num_hidden_layers"],
            intermediate=data.get("intermediate_size") or 4 * hidden,
            vocab=data["vocab_size"],
            heads=heads,
            kv_heads=data.get("num_key_value_heads") or heads,
            head_dim=data.get("head_dim") or hidden // heads,
            tied=bool(data.get("tie_word_embeddings") or False),
            max_positions=data.get("max_position_embeddings") or 2048,
            dtype=_CONFIG_DTYPES.get(str(data.get("torch_dtype", data.get("dtype"))), "float32"),
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelShape:
        """From a model folder's ``config.json`` (:func:`read_config`, :meth:`from_config`)."""
        return cls.from_config(read_config(folder), str(Path(folder) / "config.json"))

    @property
    def layer_parameters(self) -> int:
        """One block: the attention projections, the gated MLP and two norms."""
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        return q + kv + o + 3 * self.hidden * self.intermediate + 2 * self.hidden

    @property
    def parameters(self) -> int:
        """Every parameter: embeddings, blocks, final norm, and the LM head unless tied."""
        embed = self.vocab * self.hidden
        head = 0 if self.tied else self.vocab * self.hidden
        return embed + self.layers * self.layer_parameters + self.hidden + head

    def lora_parameters(self, r: int, targets: tuple[str, ...]) -> int:
        """The trainable parameters of LoRA adapters of rank ``r`` on ``targets``."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        shapes = {
            "q_proj": (self.hidden, q_out),
            "k_proj": (self.hidden, kv_out),
            "v_proj": (self.hidden, kv_out),
            "o_proj": (q_out, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }
        per_layer = sum(r * (i + o) for name, (i, o) in shapes.items() if name in targets)
        return self.layers * per_layer

    def activation_bytes(self, tokens: int, dtype: str, checkpointing: bool = False) -> int:
        """What a gradient pass over ``tokens`` tokens keeps for its backward pass (see the
        module docstring); with gradient checkpointing, a layer's inputs and one layer whole."""
        width = DTYPE_BYTES[dtype]
        per_layer = 16 * self.hidden + 6 * self.intermediate
        if checkpointing:
            kept = tokens * (self.layers * self.hidden + per_layer) * width
        else:
            kept = tokens * self.layers * per_layer * width
        return kept + 3 * tokens * self.vocab * 4  # logits are float32


@dataclass(frozen=True)
class UpdateBytes:
    """One agent's bytes on one device (a rank's share on a gang), by kind."""

    weights: int
    gradients: int
    optimizer: int
    snapshot: int
    reference: int
    activations: int
    gathered: int
    engine: int

    def peak(self, epochs: int) -> int:
        """The update's peak (see the module docstring)."""
        held = self.weights + self.reference + self.optimizer + self.gradients + self.engine
        backward = held + self.activations + self.gathered
        if epochs > 1:
            backward += self.snapshot
        step = held + self.snapshot + self.gathered
        return max(backward, step)

    def parts(self) -> dict[str, int]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "snapshot": self.snapshot,
            "reference": self.reference,
            "activations": self.activations,
            "gathered": self.gathered,
            "engine": self.engine,
        }


def update_peak(
    shape: ModelShape,
    *,
    dtype: str,
    trainable: int,
    tokens: int,
    shards: int = 1,
    snapshot: bool = True,
    reference: bool = False,
    lora: bool = False,
    checkpointing: bool = False,
    engine: int = 0,
) -> UpdateBytes:
    """The bytes of an agent of ``shape`` (weights in ``dtype``; ``trainable`` of its
    parameters trained with AdamW) updating on a micro-batch of ``tokens`` tokens, on one of
    ``shards`` ranks (FSDP shards weights, gradients, moments, snapshot and reference, and
    gathers one layer at a time; activations are a rank's own). ``snapshot``: the trust region's
    copy of the trainable parameters and moments on the device; ``reference``: a frozen copy (a
    LoRA agent's: its adapters); ``engine``: a rollout engine's share of the device."""
    width = DTYPE_BYTES[dtype]
    whole = shape.parameters * width
    train = trainable * width
    per = math.ceil
    gathered = shape.layer_parameters * width if shards > 1 else 0
    return UpdateBytes(
        weights=per(whole / shards),
        gradients=per(train / shards),
        optimizer=per(2 * train / shards),
        snapshot=per(3 * train / shards) if snapshot else 0,
        reference=per((train if lora else whole) / shards) if reference else 0,
        activations=shape.activation_bytes(tokens, dtype, checkpointing),
        gathered=gathered,
        engine=engine,
    )
