"""Policies without a model: scripted experts, random text, constant replies and a human at the
terminal. They are the zero-cost policies of tests, benchmarks and behaviour-cloning data."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np

from tasks.base import Problem, Task
from tasks.capabilities import SupportsExpert
from teamtr_core.policy import Generation, SamplingParams

_RANDOM_CHARS = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 +-*=:.,?!\n"))


def _rng_for(sampling: SamplingParams, fallback: np.random.Generator) -> np.random.Generator:
    return np.random.default_rng(sampling.seed) if sampling.seed is not None else fallback


class ScriptedExpert:
    """A task's scripted expert, wrong with probability ``error_rate`` (independently per
    message).

    A privileged policy (:class:`~teamtr_core.policy.PrivilegedPolicy`): the runner tells it the
    problem behind each context, and the task's ``expert_reply(context, rng, make_error=...,
    problem=...)`` writes the message. Use it through a :class:`~teamtr_env.runners.Runner`, or
    call :meth:`generate_privileged` with the problems yourself (plain ``generate`` passes none).

    Args:
        task: a task implementing ``expert_reply``.
        error_rate: probability that a message is a plausible wrong reply.
        seed: seeds the internal generator (used when the sampling params carry no seed).

    Raises:
        TypeError: if the task has no scripted expert, or its ``expert_reply`` takes no
            ``problem`` keyword.
        ValueError: if ``error_rate`` is not in [0, 1].
    """

    def __init__(self, task: Task, error_rate: float = 0.0, seed: int | None = None) -> None:
        if not isinstance(task, SupportsExpert):
            raise TypeError(
                f"Task {getattr(task, 'name', task)!r} has no scripted expert: it must implement "
                "expert_reply(context, rng, *, make_error, problem=None)."
            )
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {error_rate}")
        _check_takes_problem(task)
        self.task = task
        self.error_rate = error_rate
        self._rng = np.random.default_rng(seed)

    def generate_privileged(
        self,
        prompts: Sequence[str],
        problems: Sequence[Problem | None],
        sampling: SamplingParams,
    ) -> list[Generation]:
        """The expert's message for each context, given the problem of its episode."""
        if len(problems) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(problems)} problems")
        rng = _rng_for(sampling, self._rng)
        errors = rng.random(len(prompts)) < self.error_rate
        reply = self.task.expert_reply
        return [
            Generation(reply(p, rng, make_error=bool(e), problem=problem))
            for p, e, problem in zip(prompts, errors, problems)
        ]

    def generate(self, prompts: Sequence[str], sampling: SamplingParams) -> list[Generation]:
        """The expert's message for each context without its problem: right for tasks whose
        expert reads everything from the text (arithmetic, pipeline, blocksworld, ...); a
        privileged expert (math, tool use, situation puzzles, ...) then answers as it can
        without the problem, so give it the problems (:meth:`generate_privileged`)."""
        return self.generate_privileged(prompts, [None] * len(prompts), sampling)


def _check_takes_problem(task: Task) -> None:
    """Refuses a task whose ``expert_reply`` takes no ``problem`` keyword: the expert is always
    called with the episode's problem (``None`` when it has none)."""
    try:
        signature = inspect.signature(task.expert_reply)  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # no signature to read: the call itself will tell
        return
    params = signature.parameters.values()
    if any(p.name == "problem" or p.kind is p.VAR_KEYWORD for p in params):
        return
    shown = signature.replace(  # the parameters as written, without their annotations
        parameters=[p.replace(annotation=p.empty) for p in params],
        return_annotation=signature.empty,
    )
    raise TypeError(
        f"Task {getattr(task, 'name', task)!r}: expert_reply{shown} takes no 'problem' "
        "keyword, which the scripted expert always passes (the episode's problem, or None): add "
        "it, e.g. expert_reply(context, rng, *, make_error, problem=None)."
    )


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
