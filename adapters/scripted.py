"""Policies without a model: scripted experts, random text, constant replies and a human at the
terminal. They are the zero-cost policies of tests, benchmarks and behaviour-cloning data."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tasks.base import SupportsExpert, Task
from teamtr_core.policy import Generation, SamplingParams

_RANDOM_CHARS = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 +-*=:.,?!\n"))


def _rng_for(sampling: SamplingParams, fallback: np.random.Generator) -> np.random.Generator:
    return np.random.default_rng(sampling.seed) if sampling.seed is not None else fallback


class ScriptedExpert:
    """A task's scripted expert acting on the rendered context alone, wrong with probability
    ``error_rate`` (independently per message).

    Args:
        task: a task implementing ``expert_reply(context, rng, make_error=...)``.
        error_rate: probability that a message is a plausible wrong reply.
        seed: seeds the internal generator (used when the sampling params carry no seed).

    Raises:
        TypeError: if the task has no scripted expert.
        ValueError: if ``error_rate`` is not in [0, 1].
    """

    def __init__(self, task: Task, error_rate: float = 0.0, seed: int | None = None) -> None:
        if not isinstance(task, SupportsExpert):
            raise TypeError(
                f"Task {getattr(task, 'name', task)!r} has no scripted expert: it must implement "
                "expert_reply(context, rng, make_error=...)."
            )
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate}")
        self.task = task
        self.error_rate = error_rate
        self._rng = np.random.default_rng(seed)

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        rng = _rng_for(sampling, self._rng)
        errors = rng.random(len(prompts)) < self.error_rate
        return [
            Generation(self.task.expert_reply(p, rng, make_error=bool(e)))
            for p, e in zip(prompts, errors)
        ]


class RandomPolicy:
    """Random short strings of letters, digits and arithmetic symbols (a floor for any task).

    Args:
        max_chars: the longest message.
        seed: seeds the internal generator (used when the sampling params carry no seed).
    """

    def __init__(self, max_chars: int = 24, seed: int | None = None) -> None:
        self.max_chars = max_chars
        self._rng = np.random.default_rng(seed)

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        rng = _rng_for(sampling, self._rng)
        lengths = rng.integers(0, self.max_chars + 1, size=len(prompts))
        return [Generation("".join(rng.choice(_RANDOM_CHARS, size=int(n)))) for n in lengths]


class ConstantPolicy:
    """Always says ``text`` (or ``texts[i]`` cycling): handy in tests and for probing verifiers."""

    def __init__(self, text: str | Sequence[str]) -> None:
        self.texts = [text] if isinstance(text, str) else list(text)
        if not self.texts:
            raise ValueError("ConstantPolicy needs at least one text, got an empty list")
        self.calls = 0

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        self.calls += 1
        return [Generation(self.texts[i % len(self.texts)]) for i in range(len(prompts))]


class HumanPolicy:
    """A person at the terminal: shows each context and reads one line per message."""

    def __init__(
        self,
        read: Callable[[str], str] = input,
        show: Callable[[str], None] = print,
    ) -> None:
        self.read = read
        self.show = show

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        out = []
        for prompt in prompts:
            self.show(prompt)
            try:
                out.append(Generation(self.read("> ")))
            except EOFError:
                out.append(Generation(""))
        return out
