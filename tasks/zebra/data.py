"""Problems from files: the official ZebraLogic ``grid_mode`` rows (JSONL or one JSON list) and the
project's own JSONL (``tasks.save_problems``), told apart row by row.

Official row: ``{"id": "lgp-test-3x3-12", "size": "3*3", "puzzle": "There are 3 houses, ...",
"solution": {"header": ["House", "Name", ...], "rows": [["1", "Arnold", ...], ...]}}``. The public
``allenai/ZebraLogicBench`` copy hides the solutions; rows whose cells are ``"___"`` or empty load
with ``meta["gold_available"] = False`` and score 0 with reason ``no_gold_solution``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.base import Problem, Split
from tasks.data_files import read_json_rows
from tasks.zebra.grading import gold_table, size_bucket, zeroeval_group
from teamtr_core.errors import ConfigError

REDACTED = frozenset({"", "___"})
_SIZE = re.compile(r"([0-9])\*([0-9])")


def problem_meta(n_houses: int, n_attrs: int) -> dict[str, Any]:
    """The breakdown fields of a problem of this size."""
    size = f"{n_houses}*{n_attrs}"
    return {
        "size": size,
        "bucket": size_bucket(size),
        "zeroeval_group": zeroeval_group(size),
    }


def check_solution(solution: Any) -> tuple[int, int]:
    """``(N, M)`` of an official ``solution`` field.

    Raises:
        ValueError: saying what is wrong with it.
    """
    if not isinstance(solution, Mapping):
        raise ValueError(f"'solution' must be an object with 'header' and 'rows', got {solution!r}")
    table = gold_table(solution)
    n, m = len(table), len(solution["header"]) - 1
    if not 2 <= n <= 6 or not 2 <= m <= 6:
        raise ValueError(f"solution must have 2-6 rows and 2-6 attributes, got {n}x{m}")
    return n, m


def problem_from_row(row: Mapping[str, Any], split: Split = "test") -> Problem:
    """A :class:`Problem` from one official ``grid_mode`` row.

    Raises:
        ValueError: naming the first missing or malformed field.
    """
    missing = [k for k in ("id", "puzzle", "solution") if k not in row]
    if missing:
        raise ValueError(f"official rows need 'id', 'puzzle' and 'solution'; missing {missing}")
    if not isinstance(row["puzzle"], str) or not row["puzzle"].strip():
        raise ValueError("'puzzle' must be a non-empty string")
    n, m = check_solution(row["solution"])
    size = str(row.get("size", f"{n}*{m}"))
    match = _SIZE.fullmatch(size)
    if match is None or (int(match.group(1)), int(match.group(2))) != (n, m):
        raise ValueError(f"'size' {size!r} does not match the solution's {n} rows x {m} columns")
    solution: dict[str, Any] = {
        "header": [str(h) for h in row["solution"]["header"]],
        "rows": [[str(c) for c in r] for r in row["solution"]["rows"]],
    }
    redacted = any(c.strip() in REDACTED for r in solution["rows"] for c in r[1:])
    return Problem(
        id=str(row["id"]),
        data={"puzzle": row["puzzle"], "header": solution["header"][1:], "source": "zebralogic"},
        answer=solution,
        split=split,
        meta={**problem_meta(n, m), "gold_available": not redacted},
    )


def _project_problem(row: Mapping[str, Any]) -> Problem:
    problem = Problem.from_dict(row)
    puzzle = problem.data.get("puzzle")
    if not isinstance(puzzle, str) or not puzzle.strip():
        raise ValueError("project rows need a non-empty string data['puzzle'] (the puzzle text)")
    check_solution(problem.answer)
    return problem


EXPECTED = (
    "official ZebraLogic grid_mode rows (id, size, puzzle, solution) or project rows (id, data, "
    "answer): one JSON object per line, or one JSON list of them"
)


def load_file(path: str | Path, split: Split = "test") -> list[Problem]:
    """Reads official ``grid_mode`` rows (JSONL, or a JSON list as a dataset export writes) and/or
    project rows (with ``data``); official rows get ``split``.

    Raises:
        ConfigError: (a ``ValueError``) listing every bad line at once, each as ``file:line: ...``
            (``file:line: item N`` in a JSON list): not JSON, not an object, a missing or malformed
            field, a duplicate id (with the line that had it first); the first 50 and a count of
            the rest. Or a file with no rows.
        OSError: the file cannot be read.
    """
    read = read_json_rows(path, layout="array", expected=EXPECTED)
    problems: list[Problem] = []
    for row in read.rows:
        try:
            if "data" in row.value and "puzzle" not in row.value:
                problem = _project_problem(row.value)
            else:
                problem = problem_from_row(row.value, split)
        except (ValueError, KeyError, TypeError) as exc:
            read.add(
                row,
                "expected an official ZebraLogic grid_mode row (id, size, puzzle, solution) or a "
                f"project row (id, data, answer): {exc}",
            )
            continue
        read.keep(row, problem, problems)
    if read.bad:
        raise ConfigError(f"data file {path}", read.errors())
    if not problems:
        raise ConfigError(f"data file {path}", [f"{path}: no rows found"])
    return problems
