"""How many bytes one agent's update holds, from its model's architecture alone (a ``config.json``
or the tiny model's spec: no weights are loaded), pure arithmetic for :mod:`trainers.run.memory_plan`.

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

__all__ = ["DTYPE_BYTES", "ModelShape", "UpdateBytes", "update_peak"]

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of each weight dtype an agent may load in."""

_CONFIG_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


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
    def from_config(cls, data: dict[str, Any]) -> ModelShape:
        """From a transformers ``config.json``'s fields (missing ones take Llama's defaults)."""
        hidden = int(data["hidden_size"])
        heads = int(data.get("num_attention_heads", max(hidden // 128, 1)))
        return cls(
            hidden=hidden,
            layers=int(data["num_hidden_layers"]),
            intermediate=int(data.get("intermediate_size") or 4 * hidden),
            vocab=int(data["vocab_size"]),
            heads=heads,
            kv_heads=int(data.get("num_key_value_heads") or heads),
            head_dim=int(data.get("head_dim") or hidden // heads),
            tied=bool(data.get("tie_word_embeddings", False)),
            max_positions=int(data.get("max_position_embeddings", 2048)),
            dtype=_CONFIG_DTYPES.get(str(data.get("torch_dtype", data.get("dtype"))), "float32"),
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> ModelShape:
        """From a model folder's ``config.json``."""
        return cls.from_config(json.loads((Path(folder) / "config.json").read_text()))

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
