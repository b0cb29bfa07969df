"""The ``teamtr/ZebraLogic-v0`` task plugin: ZebraLogic grid-mode logic puzzles, generated or loaded
from the official files, graded exactly as ZeroEval grades them."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import (
    SPLITS,
    Problem,
    Score,
    SingleAnswerTask,
    Split,
    TaskConfigError,
    is_int,
    split_of,
)
from tasks.zebra.data import check_solution, load_file, problem_meta
from tasks.zebra.expert import (
    RECALLED_REASONING,
    SOLVED_REASONING,
    answer_json,
    solve_text,
    swap_two_values,
)
from tasks.zebra.generate import build_puzzle, draw_solution
from tasks.zebra.grading import aggregate, gold_table, grade_grid
from tasks.zebra.puzzle import MAX_SIZE, MIN_SIZE, Puzzle, render_puzzle, solution_table

INSTRUCTION = (
    "\n\n\n# Instruction\n\nNow please solve the above puzzle. Present your reasoning and solution "
    "in the following json format:\n\n"
)
_MAX_DRAWS = 1000
_SIZE_TEXT = re.compile(r"\s*([0-9])\s*[x*X]\s*([0-9])\s*")


def answer_template(headers: Sequence[str], n_houses: int) -> str:
    """ZeroEval's JSON answer template: ``"___"`` in every cell, indented by four."""
    template = {
        "reasoning": "___",
        "solution": {f"House {i + 1}": {h: "___" for h in headers} for i in range(n_houses)},
    }
    return json.dumps(template, indent=4)


def render_prompt(puzzle_text: str, headers: Sequence[str], n_houses: int) -> str:
    """The puzzle, then the instruction and the answer template (ZeroEval's zero-shot layout)."""
    return puzzle_text + INSTRUCTION + answer_template(headers, n_houses)


class ZebraTask(SingleAnswerTask):
    """ZebraLogic (grid mode): fill an ``N`` houses x ``M`` attributes grid from clues.

    Args:
        houses: ``N`` of generated puzzles (2-6).
        attributes: ``M`` of generated puzzles (2-6).
        sizes: instead of ``houses``/``attributes``, draw each puzzle's size uniformly from these,
            e.g. ``["2x2", "3x3", "4x4"]``, ``"3x3,4x5"`` or ``[[3, 3], [4, 5]]``.
        split: the split generated problems are labelled with.
        data_split: the split of problems loaded from official files (``--data-path``).

    Raises:
        TaskConfigError: listing every invalid argument at once.
    """

    name = "zebra"
    description = "ZebraLogic grid-mode logic puzzles (generated or official); ZeroEval grading."

    def __init__(
        self,
        houses: int = 3,
        attributes: int = 3,
        sizes: str | Sequence[Any] | None = None,
        split: str = "train",
        data_split: str = "test",
    ) -> None:
        errors = []
        for label, value in (("houses", houses), ("attributes", attributes)):
            if not is_int(value) or not MIN_SIZE <= value <= MAX_SIZE:
                errors.append(
                    f"{label} must be an integer in {MIN_SIZE}..{MAX_SIZE}, got {value!r}"
                )
        parsed_sizes, size_errors = _parse_sizes(sizes)
        errors += size_errors
        for label, name in (("split", split), ("data_split", data_split)):
            if name not in SPLITS:
                errors.append(f"{label} must be one of {SPLITS}, got {name!r}")
        if errors:
            raise TaskConfigError("ZebraTask", errors)
        self.sizes = parsed_sizes or ((houses, attributes),)
        self.split: Split = split  # type: ignore[assignment]
        self.data_split: Split = data_split  # type: ignore[assignment]

    def sample(self, rng: np.random.Generator) -> Problem:
        """A generated puzzle of this task's split.

        The train / validation / test generators partition the *solutions* by a hash of the
        problem id (``tasks.base.split_of``), which names the solution: a held-out puzzle never
        shares its solution grid with a training puzzle. The split is decided before the clues
        are reduced, so rejected draws cost almost nothing.
        """
        for _ in range(_MAX_DRAWS):
            n, m = self.sizes[int(rng.integers(len(self.sizes)))]
            attributes, grid = draw_solution(rng, n, m)
            solution = solution_table(Puzzle(n, attributes, ()), grid)
            digest = hashlib.sha1(json.dumps(solution).encode("utf-8")).hexdigest()[:16]
            problem_id = f"zebra-gen-{n}x{m}-{digest}"
            if split_of(problem_id) == self.split:
                break
        else:  # pragma: no cover - each draw lands in a split with probability >= 0.1
            raise RuntimeError(f"no {self.split} puzzle in {_MAX_DRAWS} draws")
        puzzle = build_puzzle(rng, attributes, grid)
        kinds = Counter(c.kind.value for c in puzzle.clues)
        return Problem(
            id=problem_id,
            data={
                "puzzle": render_puzzle(puzzle),
                "header": list(puzzle.headers),
                "source": "generated",
                "clue_kinds": dict(sorted(kinds.items())),
            },
            answer=solution,
            split=self.split,
            meta={**problem_meta(n, m), "gold_available": True, "clues": len(puzzle.clues)},
        )

    def load(self, path: str | Path) -> list[Problem]:
        """Official ``grid_mode`` rows (JSONL or a JSON list) and/or the project's JSONL."""
        return load_file(path, self.data_split)

    def prompt(self, problem: Problem) -> str:
        n_houses, _ = check_solution(problem.answer)
        headers = problem.answer["header"][1:]
        text = render_prompt(problem.data["puzzle"], headers, n_houses)
        if problem.data.get("source") == "generated":
            return text  # the expert always reads generated puzzles from the text
        return text  # official wording may defeat the text parser

    def grade(self, problem: Problem, text: str) -> Score:
        try:
            gold = gold_table(problem.answer)
        except (ValueError, AttributeError) as exc:
            return Score(0.0, False, None, {"reason": "invalid_gold_answer", "error": str(exc)})
        result = grade_grid(gold, text if isinstance(text, str) else str(text))
        size = problem.meta.get("size", f"{len(gold)}*{len(problem.answer['header']) - 1}")
        details: dict[str, Any] = {
            "reason": result.reason,
            "answered": result.answered,
            "cells_correct": result.cells_correct,
            "cells_total": result.cells_total,
            "size": size,
            "bucket": problem.meta.get("bucket", "unknown"),
        }
        answer = json.dumps(result.cells, ensure_ascii=False) if result.answered else None
        if not problem.meta.get("gold_available", True):
            details["reason"] = "no_gold_solution"
            return Score(0.0, False, answer, details)
        return Score(float(result.correct), result.correct, answer, details)

    def aggregate_details(self, details: Sequence[Any]) -> dict[str, float]:
        """ZeroEval's summary over many episodes' score details, for evaluation reports: puzzle
        accuracy, pooled cell accuracy and no-answer rate per size bucket and overall."""
        out: dict[str, float] = {}
        for bucket, summary in aggregate(details).items():
            key = bucket.lower()
            out[f"{key}/puzzle_acc"] = summary.puzzle_acc
            out[f"{key}/cell_acc"] = summary.cell_acc
            out[f"{key}/no_answer_rate"] = summary.no_answer_rate
        return out

    def expert_reply(
        self,
        context: str,
        rng: np.random.Generator,
        *,
        make_error: bool,
        problem: Problem | None = None,
    ) -> str:
        """Reads the puzzle from ``context``, solves it with the SAT solver and answers in the
        official JSON; swaps two values of one attribute when ``make_error``. Falls back to the
        gold solution of ``problem`` (privileged) only when the text cannot be parsed."""
        solution = solve_text(context)
        how = SOLVED_REASONING
        if solution is None:
            if problem is None or not problem.meta.get("gold_available", True):
                return "I cannot find a puzzle I can solve in the context."
            solution, how = dict(problem.answer), RECALLED_REASONING
        if make_error:
            solution = swap_two_values(solution, rng)
        return answer_json(solution, how)


def _parse_sizes(sizes: object) -> tuple[tuple[tuple[int, int], ...], list[str]]:
    """``((N, M), ...)`` from the ``sizes`` option, and every error with it."""
    if sizes is None:
        return (), []
    if isinstance(sizes, str):
        items: list[Any] = sizes.split(",")
    elif isinstance(sizes, Sequence):
        items = list(sizes)
    else:
        return (), [f"sizes: expected a list of sizes like ['3x3', '4x4'], got {sizes!r}"]
    parsed, errors = [], []
    for item in items:
        pair: tuple[Any, ...] = ()
        if isinstance(item, str) and (match := _SIZE_TEXT.fullmatch(item)):
            pair = (int(match.group(1)), int(match.group(2)))
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            pair = tuple(item)
        if len(pair) == 2 and all(is_int(v) and MIN_SIZE <= v <= MAX_SIZE for v in pair):
            parsed.append((int(pair[0]), int(pair[1])))
        else:
            errors.append(
                f"sizes: {item!r} is not a size 'NxM' (or [N, M]) with N and M in "
                f"{MIN_SIZE}..{MAX_SIZE}"
            )
    if not items:
        errors.append("sizes: expected at least one size, got none")
    return tuple(parsed), errors
