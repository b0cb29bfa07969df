"""The Policy protocol: what the runner and the trainers require of an agent's policy.

A policy turns a batch of rendered contexts (one per environment where its agent is active) into one
generation each. The runner needs only ``generate`` (:class:`Policy`). Trainable backends
(transformers, LoRA, tabular) also implement :class:`TrainablePolicy`: differentiable per-token
log-probabilities of given completions, parameters and state dicts.

Mask convention, everywhere in this project: ``True`` means the token counts.

This module imports no torch at import time, so model-free code (the runner, scripted policies,
tasks) stays light.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from teamtr_core.errors import ConfigError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one message: the one sampling vocabulary of the project.

    The Policy protocol takes it per call, and configs use it as their ``sampling`` section (a
    team config's, each of its agents', a training run's), so the same keys mean the same thing
    everywhere. In a config, leave ``seed`` unset: the runner derives one per call.

    Attributes:
        temperature: softmax temperature (the paper uses 0.8); 0 means greedy.
        top_p: nucleus mass (1.0 = off).
        top_k: 0 = off. Keep it 0 for on-policy training: a truncated distribution is not the
            policy whose log-probs the trainer computes.
        max_new_tokens: the length limit of one message.
        stop: strings that end a message (not included in the text).
        seed: per-call seed; the runner derives one per call so whole rollouts are reproducible.
    """

    temperature: float = field(default=0.8, metadata={"help": "softmax temperature; 0 = greedy"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus mass; 1.0 = off"})
    top_k: int = field(default=0, metadata={"help": "0 = off (keep it off for on-policy training)"})
    max_new_tokens: int = field(default=64, metadata={"help": "message length limit in tokens"})
    stop: tuple[str, ...] = field(default=(), metadata={"help": "strings that end a message"})
    seed: int | None = field(
        default=None,
        metadata={"help": "per-call seed (the runner sets it; leave unset in configs)"},
    )

    def __post_init__(self) -> None:
        errors = []
        if self.temperature < 0:
            errors.append(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            errors.append(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            errors.append(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.max_new_tokens < 1:
            errors.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if errors:
            raise ValueError("Invalid SamplingParams: " + "; ".join(errors))
        object.__setattr__(self, "stop", tuple(self.stop))

    def updated(self, **overrides: Any) -> SamplingParams:
        """A copy with some keys replaced, e.g. ``temperature=1.0`` from a command line; a
        ``None`` value leaves its key as it is.

        Raises:
            ConfigError: an unknown key or an invalid value (every problem at once).
        """
        values = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(values) - {f.name for f in fields(self)})
        if unknown:
            raise ConfigError("sampling overrides", [f"unknown sampling keys {unknown}"])
        try:
            return replace(self, **values)
        except ValueError as exc:
            raise ConfigError("sampling overrides", [str(exc)]) from exc


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (peft), used by ``HFPolicy(lora=...)`` and team configs.

    Attributes:
        r: rank.
        alpha: scaling numerator (``alpha / r`` scales the update).
        dropout: dropout on the adapter input.
        target_modules: module names to adapt (Llama/Qwen attention projections by default).
    """

    r: int = field(default=8, metadata={"help": "LoRA rank"})
    alpha: int = field(default=16, metadata={"help": "LoRA alpha (update scale alpha / r)"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on the adapter input"})
    target_modules: tuple[str, ...] = field(
        default=("q_proj", "k_proj", "v_proj", "o_proj"),
        metadata={"help": "module names that get adapters"},
    )

    def __post_init__(self) -> None:
        errors = []
        if self.r < 1:
            errors.append(f"r must be >= 1, got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            errors.append(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            errors.append("target_modules must name at least one module")
        if errors:
            raise ValueError("Invalid LoraSettings: " + "; ".join(errors))
        object.__setattr__(self, "target_modules", tuple(self.target_modules))


@dataclass(frozen=True)
class Generation:
    """One generated message.

    Attributes:
        text: the decoded message.
        token_ids: the sampled token ids (empty for policies without a tokenizer).
        clipped: generation stopped at the token limit (``SamplingParams.max_new_tokens``, or
            the room left in the model's context window) without an end token or a stop string:
            the message was probably cut off. Always ``False`` for policies without a token
            budget (scripted, tabular).
        logprobs: the sampler's own log-probability of each token in ``token_ids`` (after its
            temperature), where the backend reports them (a vLLM engine does); empty otherwise.
            The trainer compares them with its own log-probs of the same tokens (the
            engine-trainer mismatch, ``rollout/logprob_gap``).
    """

    text: str
    token_ids: tuple[int, ...] = ()
    clipped: bool = False
    logprobs: tuple[float, ...] = ()


@runtime_checkable
class Policy(Protocol):
    """Anything that can write messages for a batch of contexts."""

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """Returns exactly one generation per prompt, in order."""
        ...


@runtime_checkable
class PrivilegedPolicy(Protocol):
    """A policy that is also told the problem behind each context: a task's scripted expert.

    Some experts cannot act from the text alone (a MATH answer, a tool-use task's gold actions, a
    situation puzzle's hidden story), so the runner hands them each context's problem explicitly
    with :meth:`generate_privileged` instead of calling ``generate``. This is an oracle for tests,
    behaviour-cloning data and probes; a model policy never implements it.
    """

    def generate_privileged(
        self, prompts: Sequence[str], problems: Sequence[Any], sampling: SamplingParams
    ) -> list[Generation]:
        """One generation per prompt, in order; ``problems[i]`` is the problem (a
        ``tasks.base.Problem``) of the episode that ``prompts[i]`` belongs to."""
        ...


@dataclass(frozen=True)
class TokenLogprobs:
    """Per-token log-probabilities of a batch of completions under a policy.

    Attributes:
        logprobs: float tensor ``[B, T]``; ``logprobs[b, u]`` is ``log pi(x_u | prompt_b, x_<u)``
            for completion ``b``'s ``u``-th token; differentiable when computed with grad.
        mask: bool tensor ``[B, T]``; ``True`` where a real completion token is (padding is
            ``False``). Message log-prob: ``(logprobs * mask).sum(-1)``.
        token_ids: long tensor ``[B, T]`` of the completion tokens scored (0 at padding).
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    token_ids: torch.Tensor

    def message_logprobs(self) -> torch.Tensor:
        """``log pi(m | s)`` per completion, shape ``[B]`` (sum over its tokens)."""
        return (self.logprobs * self.mask).sum(-1)


Completion = Sequence[int] | str


@runtime_checkable
class TrainablePolicy(Policy, Protocol):
    """A policy whose parameters a trainer can update.

    ``completions`` are token id sequences (``Generation.token_ids``, the exact sampled tokens) or
    strings (tokenised by the policy). Scoring the sampled ids is what on-policy training needs:
    re-tokenising decoded text may not reproduce them.
    """

    def logprobs(self, prompts: Sequence[str], completions: Sequence[Completion]) -> TokenLogprobs:
        """Differentiable per-token log-probs of ``completions[b]`` after ``prompts[b]``."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trainable parameters (LoRA: only the adapter weights)."""
        ...

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> Any: ...


SYNC_KEYS = ("count", "tensors", "bytes", "seconds")


def engine_syncs(policies: Iterable[Any]) -> dict[str, float] | None:
    """The weight syncs into the rollout engines of ``policies`` so far (``count``,
    ``tensors``, ``bytes``, ``seconds``, summed), or ``None`` when none of them has started an
    engine. A policy with a rollout engine (``adapters.rollout_engine.EngineRollouts``) has
    ``started`` and ``sync_stats()``; any other policy is skipped."""
    started = [p for p in policies if getattr(p, "started", False)]
    if not started:
        return None
    return add_syncs([p.sync_stats() for p in started])


def add_syncs(parts: Iterable[Mapping[str, float] | None]) -> dict[str, float] | None:
    """The sum of several :func:`engine_syncs` totals (``None`` ones are skipped; ``None`` if
    all are)."""
    given = [p for p in parts if p is not None]
    if not given:
        return None
    return {key: float(sum(p.get(key, 0.0) for p in given)) for key in SYNC_KEYS}


def syncs_since(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None
) -> dict[str, float] | None:
    """The syncs made between two :func:`engine_syncs` totals (``None`` when ``after`` is: no
    engine has started); engines that started in between count from zero."""
    if after is None:
        return None
    base = before or dict.fromkeys(after, 0.0)
    return {key: after[key] - base.get(key, 0.0) for key in after}
