"""The scripted expert's pure parts: solve a puzzle from text, write the official JSON answer, and
make a plausible mistake (two values of one attribute swapped)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from tasks.zebra.puzzle import solution_table
from tasks.zebra.solver import solve_puzzle
from tasks.zebra.textparse import parse_puzzle

SOLVED_REASONING = (
    "I encoded every clue as a constraint; exactly one assignment satisfies all of them."
)
RECALLED_REASONING = "I recalled the solution of this puzzle."


def solve_text(text: str) -> dict[str, list] | None:
    """The ``{header, rows}`` solution of the first puzzle in ``text``, or ``None`` when the puzzle
    cannot be read or does not have exactly one solution."""
    puzzle = parse_puzzle(text)
    if puzzle is None:
        return None
    solutions = solve_puzzle(puzzle, limit=2)
    if len(solutions) != 1:
        return None
    return solution_table(puzzle, solutions[0])


def swap_two_values(solution: Mapping[str, Any], rng: np.random.Generator) -> dict[str, list]:
    """A copy of ``solution`` with the values of two houses swapped in one random attribute."""
    rows = [list(r) for r in solution["rows"]]
    column = int(rng.integers(1, len(solution["header"])))
    i, j = (int(k) for k in rng.choice(len(rows), size=2, replace=False))
    rows[i][column], rows[j][column] = rows[j][column], rows[i][column]
    return {"header": list(solution["header"]), "rows": rows}


def answer_json(solution: Mapping[str, Any], reasoning: str) -> str:
    """The official answer ``{"reasoning": ..., "solution": {"House 1": {"Name": ...}, ...}}``,
    compact (one line) so it fits the team's message limit."""
    header = solution["header"]
    table = {
        f"House {i + 1}": {str(col): row[j] for j, col in enumerate(header) if j > 0}
        for i, row in enumerate(solution["rows"])
    }
    return json.dumps({"reasoning": reasoning, "solution": table}, ensure_ascii=False)
