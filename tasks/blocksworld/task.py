"""The ``teamtr/Blocksworld-v0`` task plugin: PlanBench Blocksworld plan generation / optimality."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import (
    SPLITS,
    DrawError,
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    split_of,
)
from tasks.blocksworld import text as bwtext
from tasks.blocksworld.domain import Action, Instance, facts_from_below, optimal_plan, simulate
from tasks.blocksworld.problems import (
    example_from_data,
    instance_from_data,
    load_path,
    make_problem,
)
from tasks.blocksworld.states import sample_state

MIN_BLOCKS, MAX_BLOCKS = 3, 8
MAX_DRAWS = 100_000
_RANGE = re.compile(r"\s*(\d{1,2})\s*(?:-|\.\.)\s*(\d{1,2})\s*")
_LETTERS = "abcdefghijkl"


class BlocksworldTask(SingleAnswerTask):
    """PlanBench Blocksworld: write a plan (one action per line, ``[PLAN END]``) that reaches the
    goal; graded by STRIPS simulation.

    Args:
        blocks: blocks per generated problem: an integer in 3..8, or an inclusive range
            (``"3-5"``, ``"3..5"`` or ``[3, 5]``) drawn uniformly per problem.
        require_optimal: PlanBench task 2 (plan optimality): the prompt asks to minimise time and
            a plan counts only if it is valid and as short as an optimal plan.
        stop_at_plan_end: ignore the reply from the first ``[PLAN END]`` on (PlanBench's
            completion pipelines); ``False`` reads the whole reply as PlanBench's chat-model
            evaluation does, where explanations after the plan can add actions.
        split: the split generated problems are labelled with.

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "blocksworld"
    description = (
        "PlanBench Blocksworld: plan in natural language from uniform random states; "
        "graded by STRIPS simulation (optionally optimal length)."
    )

    def __init__(
        self,
        blocks: int | str | Sequence[int] = 4,
        require_optimal: bool = False,
        stop_at_plan_end: bool = True,
        split: str = "train",
    ) -> None:
        errors = []
        size_range = _parse_blocks(blocks)
        if size_range is None:
            errors.append(
                f"blocks must be an integer in {MIN_BLOCKS}..{MAX_BLOCKS} or a range like '3-5' "
                f"or [3, 5] within it, got {blocks!r}"
            )
        for key, flag in (
            ("require_optimal", require_optimal),
            ("stop_at_plan_end", stop_at_plan_end),
        ):
            if not isinstance(flag, bool):
                errors.append(f"{key} must be true or false, got {flag!r}")
        if split not in SPLITS:
            errors.append(f"split must be one of {SPLITS}, got {split!r}")
        if errors or size_range is None:
            raise TaskConfigError("BlocksworldTask", errors)
        self.blocks = size_range
        self.require_optimal = require_optimal
        self.stop_at_plan_end = stop_at_plan_end
        self.split: Split = split  # type: ignore[assignment]

    # -- problems -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Problem:
        """Initial state and goal state drawn uniformly (Slaney & Thiébaux); the goal is the
        second state's ``on`` facts. Instances whose goal already holds are redrawn, and so are
        instances of another split: the splits partition the instances by a hash of their id
        (``tasks.base.split_of``), so train, validation and test never overlap."""
        low, high = self.blocks
        for _ in range(MAX_DRAWS):
            n = int(rng.integers(low, high + 1))
            names = tuple(_LETTERS[:n])
            init, target = sample_state(n, rng), sample_state(n, rng)
            init_facts = facts_from_below(names, init)
            goal = frozenset(f for f in facts_from_below(names, target) if f[0] == "on")
            if goal <= init_facts:
                continue
            init_code = "".join("_" if b < 0 else names[b] for b in init)
            goal_code = "".join(names[b] if b >= 0 else "." for b in target)
            problem_id = f"blocksworld:{init_code}:{goal_code}"
            if split_of(problem_id) == self.split:
                instance = Instance(names, init_facts, goal)
                return make_problem(instance, problem_id, self.split)
        raise DrawError(
            self.name,
            [f"no non-trivial {self.split} instance in {MAX_DRAWS} draws: use more blocks"],
        )

    def generate(self, n: int, rng: np.random.Generator) -> list[Problem]:
        """``n`` distinct problems (PlanBench drops duplicate instances the same way).

        Raises:
            ValueError: if the size range has fewer than ``n`` distinct problems (never for
                ``n`` up to thousands with 4 or more blocks).
        """
        seen: dict[str, Problem] = {}
        attempts = 0
        while len(seen) < n:
            attempts += 1
            if attempts > 50 * n + 1000:
                raise ValueError(f"found only {len(seen)} distinct problems after {attempts} draws")
            problem = self.sample(rng)
            seen.setdefault(problem.id, problem)
        return list(seen.values())

    def load(self, path: str | Path, split: Split = "test") -> list[Problem]:
        """PlanBench files (``instance-N.pddl``, a directory of them, a prompts JSON) or the
        project's JSONL; see :func:`tasks.blocksworld.problems.load_path`."""
        return load_path(path, split=split, optimality=self.require_optimal)

    def prompt(self, problem: Problem) -> str:
        """PlanBench's one-shot prompt (task 2 wording when ``require_optimal``)."""
        instance = instance_from_data(problem.data)
        example, example_plan = example_from_data(problem.data)
        return bwtext.render_prompt(instance, example, example_plan, self.require_optimal)

    # -- grading ------------------------------------------------------------------------------
    def grade(self, problem: Problem, text: str) -> Score:
        """Extracts the plan as PlanBench does and simulates it; never raises."""
        try:
            instance = instance_from_data(problem.data)
        except (KeyError, TypeError, ValueError) as exc:
            return Score(0.0, False, None, {"reason": "invalid_problem", "error": str(exc)[:300]})
        extracted = bwtext.extract_plan(
            text if isinstance(text, str) else str(text), stop_at_end=self.stop_at_plan_end
        )
        plan = extracted.actions
        optimal = _optimal_length(problem, instance)
        details: dict[str, Any] = {
            "plan_length": len(plan),
            "optimal_length": optimal,
            "skipped_lines": extracted.skipped,
            "plan_end_marker": extracted.stopped_at_end,
        }
        answer = "\n".join(map(str, plan)) or None
        if not plan and not instance.goal_holds(instance.init):
            return Score(0.0, False, None, {"reason": "no_plan_found", **details})
        check = simulate(instance, plan)
        if not check.valid:
            details.update(reason=check.reason, unsatisfied=list(check.unsatisfied))
            if check.step is not None:
                details.update(step=check.step, action=str(plan[check.step - 1]))
            return Score(0.0, False, answer, details)
        if self.require_optimal:
            if optimal is None:
                return Score(0.0, False, answer, {"reason": "optimal_length_unknown", **details})
            if len(plan) != optimal:
                return Score(0.0, False, answer, {"reason": "not_optimal", **details})
        return Score(1.0, True, answer, {"reason": "valid", **details})

    # -- scripted expert ----------------------------------------------------------------------
    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Reads the query (the last ``[STATEMENT]``) back from the context, plans optimally and
        writes the plan in PlanBench's words with ``[PLAN END]``; with ``make_error`` one step is
        dropped or two adjacent steps are swapped, which makes the plan invalid."""
        instance = bwtext.last_statement(context)
        if instance is None:
            return "I cannot find the problem statement."
        result = optimal_plan(instance)
        if result.plan is None:
            return "I could not find a plan.\n" + bwtext.PLAN_END
        plan = _corrupt(instance, result.plan, rng) if make_error else result.plan
        return bwtext.render_plan(plan)


def _parse_blocks(value: object) -> tuple[int, int] | None:
    low: object
    high: object
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        low = high = value
    elif isinstance(value, str):
        match = _RANGE.fullmatch(value)
        if value.strip().isdigit():
            low = high = int(value)
        elif match:
            low, high = int(match.group(1)), int(match.group(2))
        else:
            return None
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        low, high = value
    else:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)):
        return None
    assert isinstance(low, int) and isinstance(high, int)
    if not MIN_BLOCKS <= low <= high <= MAX_BLOCKS:
        return None
    return low, high


def _optimal_length(problem: Problem, instance: Instance) -> int | None:
    """The stored optimum (``None`` when the loader's search was capped); searched only for a row
    that stores no answer at all."""
    answer = problem.answer
    if isinstance(answer, dict) and "optimal_length" in answer:
        length = answer["optimal_length"]
        return length if isinstance(length, int) and not isinstance(length, bool) else None
    result = optimal_plan(instance, max_expansions=200_000)
    return len(result.plan) if result.plan is not None else None


def _corrupt(instance: Instance, plan: list[Action], rng: np.random.Generator) -> list[Action]:
    """Drops one step or swaps two adjacent ones. In an optimal plan pick-type and place-type
    actions alternate, so either change breaks the hand's state; checked, with a fallback."""
    wrong = list(plan)
    if len(wrong) >= 2 and rng.random() < 0.5:
        i = int(rng.integers(0, len(wrong) - 1))
        wrong[i], wrong[i + 1] = wrong[i + 1], wrong[i]
    elif wrong:
        del wrong[int(rng.integers(0, len(wrong)))]
    if simulate(instance, wrong).valid:
        block = instance.blocks[0]
        held = ("handempty",) not in instance.init
        wrong = [Action("pick-up" if held else "put-down", (block,)), *wrong]
    return wrong
