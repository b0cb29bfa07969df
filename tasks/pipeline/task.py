"""The ``teamtr/Pipeline-v0`` task plugin: a chain of operations, one step per agent."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tasks.arith.rules import extract_answer
from tasks.base import (
    Episode,
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    is_int,
)
from tasks.pipeline import rules
from teamtr_core.choices import choice_errors


class PipelineTask(SingleAnswerTask):
    """A computation split into steps that a relay of agents carries out one step each.

    The problem is a chain such as ``7 +5 -3 +8``. Played with ``visibility="previous"`` (as
    registered), the first agent sees the chain and every later agent sees only the message just
    before its turn, so agent ``i`` must apply one operation and pass the rest on
    (``12 -3 +8``), and the last agent states the result (``Answer: 17``). Every agent's message
    matters by construction: a later agent cannot see the problem, so it cannot repair an earlier
    mistake, and its input is whatever its predecessor writes. Give the team as many agents as
    the chain has ``steps``.

    Args:
        steps: operations per chain (1-8); one per agent.
        max_operand: operations are ``+d`` or ``-d`` with ``1 <= d <= max_operand`` (1-9).
        max_value: every running value stays in ``[0, max_value]`` (9-999).
        split: the split generated problems are labelled with.
        expert_error: the mistake the scripted expert makes when asked to err (behaviour-cloning
            data with ``expert_error_rate > 0``): ``"arithmetic"`` is off by 1-3;
            ``"drop_rest"`` does the step right but leaves out what the next agent needs (the
            rest of the chain; for the last step, the ``Answer:`` tag), so only the team reward
            can tell the habit is wrong.

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "pipeline"
    description = (
        "A chain of +/- steps done one step per agent; later agents see only the previous message."
    )

    def __init__(
        self,
        steps: int = 3,
        max_operand: int = 9,
        max_value: int = 99,
        split: str = "train",
        expert_error: str = "arithmetic",
    ) -> None:
        errors = []
        if not is_int(steps) or not 1 <= steps <= rules.MAX_STEPS:
            errors.append(f"steps must be an integer in 1..{rules.MAX_STEPS}, got {steps!r}")
        if not is_int(max_operand) or not 1 <= max_operand <= 9:
            errors.append(f"max_operand must be an integer in 1..9, got {max_operand!r}")
        if not is_int(max_value) or not 9 <= max_value <= 999:
            errors.append(f"max_value must be an integer in 9..999, got {max_value!r}")
        errors += choice_errors("split", split, Split)
        errors += choice_errors("expert_error", expert_error, rules.ExpertError)
        if errors:
            raise TaskConfigError("PipelineTask", errors)
        self.steps = steps
        self.max_operand = max_operand
        self.max_value = max_value
        self.split = split
        self.expert_error = expert_error

    def sample(self, rng: np.random.Generator) -> Problem:
        """A chain of this task's split (the splits partition chains by a hash of their id)."""
        return self.draw_in_split(rng, self._draw, self.split)  # type: ignore[arg-type]

    def _draw(self, rng: np.random.Generator) -> Problem:
        start, ops = rules.generate(rng, self.steps, self.max_operand, self.max_value)
        chain = rules.render(start, ops)
        return Problem(
            id="pipeline:" + chain.replace(" ", ""),
            data={"chain": chain},
            answer=rules.result(start, ops),
            split=self.split,  # type: ignore[arg-type]
            meta={"steps": len(ops)},
        )

    def prompt(self, problem: Problem) -> str:
        return str(problem.data["chain"])

    def check_problem(self, problem: Problem) -> list[str]:
        """A loaded row needs ``data["chain"]`` (``"7 +5 -3"``) and an integer answer."""
        issues = []
        chain = problem.data.get("chain")
        if not isinstance(chain, str) or rules.parse_chain(chain) is None:
            issues.append(f"data.chain: expected a chain such as '7 +5 -3', got {chain!r:.80}")
        if not is_int(problem.answer):
            issues.append(f"answer: expected an integer, got {problem.answer!r:.80}")
        return issues

    def grade(self, problem: Problem, text: str) -> Score:
        value, how = extract_answer(text)
        if value is None:
            return Score(0.0, False, None, {"reason": "no_integer_found"})
        if how != "answer_tag":
            # An unfinished chain ("9 +8") ends in an integer that is not the team's answer.
            return Score(0.0, False, str(value), {"reason": "no_answer_tag", "extraction": how})
        correct = value == problem.answer
        details = {"reason": "correct" if correct else "wrong_answer", "extraction": how}
        return Score(float(correct), correct, str(value), details)

    def local_rewards(self, episode: Episode) -> Mapping[str, float]:
        """Each agent's share of its messages that did their own step right: applied the first
        operation of the chain the agent was given (the problem's for the first message, the
        message before for the others) and passed the rest on, or, on the last operation, gave
        ``Answer: <value>``. A message whose input held no chain cannot do a step: 0. Credit for
        the agent's own work alone, whatever its predecessors did."""
        done: dict[str, list[float]] = {}
        given = str(episode.problem.data["chain"])
        for message in episode.transcript:
            if message.role != "agent":
                continue
            done.setdefault(message.speaker, []).append(float(_did_step(given, message.text)))
            given = message.text
        return {agent: sum(v) / len(v) for agent, v in done.items()}

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Does one step of the last chain in the context (the problem for the first agent, the
        previous message for the others); when ``make_error``, off by 1-3 or without the rest of
        the chain, as ``expert_error`` says."""
        chain = rules.last_chain(context)
        if chain is None:
            return "No chain."
        if make_error and self.expert_error == "drop_rest":
            return rules.step(*chain, drop_rest=True)
        error = int(rng.choice([-1, 1])) * int(rng.integers(1, 4)) if make_error else 0
        return rules.step(*chain, error=error)


def _did_step(given: str, text: str) -> bool:
    """Whether ``text`` is the right step of the last chain in ``given`` (see
    :meth:`PipelineTask.local_rewards`)."""
    chain = rules.last_chain(given)
    if chain is None:
        return False
    value, ops = chain
    new = value + ops[0]
    if len(ops) == 1:
        answer, how = extract_answer(text)
        return how == "answer_tag" and answer == new
    return rules.last_chain(text) == (new, list(ops[1:]))
