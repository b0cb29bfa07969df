"""Pluggable responders: who plays the Situation Puzzle referee and the Detective Case suspects.

AR-Bench plays both roles with an LLM. Here a responder is anything with the two methods of
:class:`Responder`; the games call only the one they need. Two ship:

* :class:`ScriptedResponder` (the default, ``responder="scripted"``): deterministic, offline, the
  transparent word-overlap rules of :mod:`tasks.arbench.sp_rules` and :mod:`tasks.arbench.dc_rules`.
* :class:`PolicyResponder`: wraps any project policy (``generate(prompts, SamplingParams) ->
  [Generation]``, e.g. ``adapters.hf.HFPolicy`` or a vLLM backend) with AR-Bench's role prompts.

This module imports nothing from ``adapters`` at import time (tasks sit below adapters); the
default sampling parameters are built on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tasks.arbench import dc_rules, prompts, sp_rules

History = Sequence[tuple[str, str]]
Renderer = Callable[[str, History, str], str]


@runtime_checkable
class Responder(Protocol):
    """Answers the team's questions in the games that need a role player."""

    def answer_puzzle(self, puzzle: Mapping[str, Any], question: str) -> str:
        """The SP referee's reply to ``question`` about ``puzzle`` (``surface``, ``bottom``,
        ``key_question``): one of :data:`tasks.arbench.sp_rules.REPLIES` for a scripted referee."""
        ...

    def answer_suspect(
        self,
        case: Mapping[str, Any],
        suspect: Mapping[str, Any],
        question: str,
        history: History,
    ) -> str:
        """The DC ``suspect``'s reply to ``question``; ``history`` holds this suspect's earlier
        ``(question, reply)`` pairs of the episode (AR-Bench keeps one conversation per suspect)."""
        ...


class ScriptedResponder:
    """The offline default: rule-based referee and suspects (see :func:`sp_rules.referee_answer`
    and :func:`dc_rules.suspect_answer`).

    Args:
        rule: the referee's word-overlap thresholds.
    """

    def __init__(self, rule: sp_rules.RefereeRule | None = None) -> None:
        self.rule = rule or sp_rules.RefereeRule()

    def answer_puzzle(self, puzzle: Mapping[str, Any], question: str) -> str:
        """Yes / No / Unknown / not-a-question by the documented word-overlap rule."""
        return sp_rules.referee_answer(
            question,
            str(puzzle.get("surface", "")),
            str(puzzle.get("bottom", "")),
            list(puzzle.get("key_question", [])),
            self.rule,
        )

    def answer_suspect(
        self,
        case: Mapping[str, Any],
        suspect: Mapping[str, Any],
        question: str,
        history: History,
    ) -> str:
        """One sentence from the suspect's testimony / timeline / story; the murderer deflects."""
        return dc_rules.suspect_answer(case, suspect, question)


def default_render(system: str, history: History, question: str) -> str:
    """Renders a role prompt and a conversation as one text prompt for ``Policy.generate``."""
    turns = "".join(f"### Player\n{q}\n### You\n{a}\n" for q, a in history)
    return f"{system}\n{turns}### Player\n{question}\n### You\n"


class PolicyResponder:
    """A responder played by any project policy, with AR-Bench's role prompts.

    Args:
        policy: anything with ``generate(prompts, sampling) -> [Generation(text, ...)]``.
        sampling: ``teamtr_core.policy.SamplingParams``; default temperature 0.7, top_p 0.7
            (AR-Bench's responder settings) and 64 new tokens.
        referee_prompt: the SP referee's system text (``{surface}``, ``{bottom}`` placeholders).
        suspect_prompt: the DC suspect's system text (``{name}``, ``{task}``, ``{story}``).
        render: ``fn(system, history, question) -> prompt``; default :func:`default_render`
            (pass one that applies a chat template for instruction-tuned models).
        max_chars: replies are cut to this length.

    Raises:
        TypeError: if ``policy`` has no ``generate``.
    """

    def __init__(
        self,
        policy: Any,
        sampling: Any = None,
        *,
        referee_prompt: str = prompts.SP_REFEREE_PROMPT,
        suspect_prompt: str = prompts.DC_SUSPECT_PROMPT,
        render: Renderer | None = None,
        max_chars: int = 1000,
    ) -> None:
        if not callable(getattr(policy, "generate", None)):
            raise TypeError(
                f"PolicyResponder needs a policy with generate(prompts, sampling), got "
                f"{type(policy).__name__}"
            )
        self.policy = policy
        self.sampling = sampling
        self.referee_prompt = referee_prompt
        self.suspect_prompt = suspect_prompt
        self.render = render or default_render
        self.max_chars = max_chars
        self.calls = 0

    def _generate(self, prompt: str) -> str:
        if self.sampling is None:
            from teamtr_core.policy import SamplingParams  # lazy: tasks do not depend on adapters

            self.sampling = SamplingParams(temperature=0.7, top_p=0.7, max_new_tokens=64)
        self.calls += 1
        generations = self.policy.generate([prompt], self.sampling)
        text = getattr(generations[0], "text", generations[0]) if generations else ""
        return str(text)[: self.max_chars]

    def answer_puzzle(self, puzzle: Mapping[str, Any], question: str) -> str:
        """The policy's referee reply, cleaned as AR-Bench does (``strip().strip(".")``)."""
        system = self.referee_prompt.format(
            surface=puzzle.get("surface", ""), bottom=puzzle.get("bottom", "")
        )
        return sp_rules.normalize_reply(self._generate(self.render(system, (), question)))

    def answer_suspect(
        self,
        case: Mapping[str, Any],
        suspect: Mapping[str, Any],
        question: str,
        history: History,
    ) -> str:
        """The policy's in-character reply, with this suspect's conversation so far."""
        system = self.suspect_prompt.format(
            name=suspect.get("name", ""),
            task=suspect.get("task", ""),
            story=suspect.get("story", ""),
        )
        return self._generate(self.render(system, history, question)).strip()


def resolve(responder: object, method: str) -> tuple[Any, list[str]]:
    """``"scripted"`` -> a :class:`ScriptedResponder`; an object with ``method`` -> itself.

    Returns:
        ``(responder, errors)``; ``errors`` is empty when the responder is usable.
    """
    if isinstance(responder, str):
        if responder == "scripted":
            return ScriptedResponder(), []
        return None, [f"responder must be 'scripted' or a Responder object, got {responder!r}"]
    if not callable(getattr(responder, method, None)):
        return None, [
            f"responder must be 'scripted' or an object with {method}(...) (see "
            f"tasks.arbench.Responder), got {type(responder).__name__}"
        ]
    return responder, []
