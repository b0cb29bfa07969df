"""The Policy protocol: what the runner and the trainers require of an agent's policy.

A policy turns a batch of rendered contexts (one per environment where its agent is active) into one
generation each. Backends (transformers, vLLM, LoRA, tabular) extend this protocol with log-probs and
parameters; the runner needs only ``generate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one message.

    Attributes:
        temperature: softmax temperature (the paper uses 0.8); 0 means greedy.
        top_p: nucleus mass (1.0 = off).
        top_k: 0 = off. Keep it 0 for on-policy training: a truncated distribution is not the
            policy whose log-probs the trainer computes.
        max_new_tokens: the length limit of one message.
        stop: strings that end a message (not included in the text).
        seed: per-call seed; the runner derives one per call so whole rollouts are reproducible.
    """

    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = field(default_factory=tuple)
    seed: int | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            problems.append(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.max_new_tokens < 1:
            problems.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if problems:
            raise ValueError("Invalid SamplingParams: " + "; ".join(problems))
        object.__setattr__(self, "stop", tuple(self.stop))


@dataclass(frozen=True)
class Generation:
    """One generated message.

    Attributes:
        text: the decoded message.
        token_ids: the sampled token ids (empty for policies without a tokenizer).
    """

    text: str
    token_ids: tuple[int, ...] = ()


@runtime_checkable
class Policy(Protocol):
    """Anything that can write messages for a batch of contexts."""

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Returns exactly one generation per prompt, in order."""
        ...
