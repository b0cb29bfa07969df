"""ZebraLogic grading exactly as ZeroEval's ``zebra_grid_eval.py``, plus the per-size summaries.

Extraction: the last complete top-level ``{...}`` of the answer by brace counting (braces inside JSON
strings count too, as in ZeroEval), newlines removed, ``json.loads``. No object, a decoding error, or
no non-null ``"solution"`` key is *no answer*. Cells: for each gold house ``"House i"`` and column
(keys case-sensitive), the predicted value (the first element if a list) ``.lower().strip()`` must
equal the gold value likewise normalised; extra keys are ignored. A puzzle is solved when all ``N*M``
cells are right; cell accuracy is pooled over all cells, with unanswered puzzles in the denominator.

Where ZeroEval would crash (a non-string cell, a house that is not an object) the cell counts as
wrong; the answer still counts as answered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_ANSWER_CHARS = 2_000_000
"""Longer answers are not parsed (scored as no answer); the env's message limit is far lower."""

SIZE_BUCKETS: dict[str, tuple[str, ...]] = {
    "Small": ("2*2", "2*3", "2*4", "2*5", "2*6", "3*2", "3*3", "4*2"),
    "Medium": ("3*4", "3*5", "3*6", "4*3", "4*4", "5*2", "6*2"),
    "Large": ("4*5", "5*3", "4*6", "5*4", "6*3"),
    "XL": ("5*5", "6*4", "5*6", "6*5", "6*6"),
}
"""The ZebraLogic paper's size groups (N houses * M attributes)."""
ZEROEVAL_EASY = ("2*2", "2*3", "2*4", "2*5", "2*6", "3*2", "3*3")
"""ZeroEval's leaderboard split: these sizes are "Easy", every other size "Hard"."""
BUCKET_ORDER = ("Small", "Medium", "Large", "XL")
_BRACE = re.compile(r"[{}]")


def size_bucket(size: str) -> str:
    """``"Small"``, ``"Medium"``, ``"Large"`` or ``"XL"`` for a size ``"N*M"``.

    Raises:
        ValueError: for a size outside 2..6 x 2..6.
    """
    for bucket, sizes in SIZE_BUCKETS.items():
        if size in sizes:
            return bucket
    raise ValueError(f"size must be 'N*M' with N and M in 2..6, got {size!r}")


def zeroeval_group(size: str) -> str:
    """ZeroEval's ``"Easy"`` / ``"Hard"`` group of a size ``"N*M"``."""
    return "Easy" if size in ZEROEVAL_EASY else "Hard"


def extract_last_complete_json(text: str) -> Any | None:
    """The last complete top-level ``{...}`` of ``text``, decoded; ``None`` if there is none or it
    does not decode (ZeroEval's ``extract_last_complete_json``: an unmatched ``}`` is skipped, an
    unclosed ``{`` never completes, newlines are removed before decoding)."""
    depth, start, last = 0, -1, None
    for match in _BRACE.finditer(text):
        if match.group(0) == "{":
            if depth == 0:
                start = match.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                last = (start, match.end())
    if last is None:
        return None
    try:
        return json.loads(text[last[0] : last[1]].replace("\n", ""))
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; so are huge ints
        return None


def gold_table(solution: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``{"House 1": {"Name": "Arnold", ...}, ...}`` from the official ``{header, rows}`` form.

    Raises:
        ValueError: if the solution is not of that form.
    """
    header, rows = solution.get("header"), solution.get("rows")
    if not isinstance(header, list) or not header or header[0] != "House":
        raise ValueError(f"solution header must start with 'House', got {header!r}")
    if not isinstance(rows, list) or not all(
        isinstance(r, list) and len(r) == len(header) for r in rows
    ):
        raise ValueError(f"solution rows must be lists of {len(header)} cells, got {rows!r}")
    return {
        f"House {i + 1}": {str(col): str(row[j]) for j, col in enumerate(header) if j > 0}
        for i, row in enumerate(rows)
    }


def _cell(value: Any) -> str | None:
    """A predicted cell normalised like ZeroEval; ``None`` where ZeroEval skips or would crash."""
    if value is None or (isinstance(value, (str, list)) and len(value) == 0):
        return None  # ZeroEval skips empty cells
    if isinstance(value, list):
        value = value[0]
    return value.lower().strip() if isinstance(value, str) else None


@dataclass(frozen=True)
class GridGrade:
    """The verdict on one answer.

    Attributes:
        answered: whether a ``"solution"`` was extracted.
        cells_correct: gold cells matched.
        cells_total: ``N*M``.
        reason: ``"correct"``, ``"wrong_cells"``, ``"no_json"``, ``"no_solution_key"`` or
            ``"answer_too_long"``.
        cells: the normalised predicted cells in gold order (``""`` where missing), if answered.
    """

    answered: bool
    cells_correct: int
    cells_total: int
    reason: str
    cells: tuple[str, ...] = field(default=())

    @property
    def correct(self) -> bool:
        """All cells right."""
        return self.answered and self.cells_correct == self.cells_total


def grade_grid(gold: Mapping[str, Mapping[str, str]], text: str) -> GridGrade:
    """Grades an answer text against a gold table (see :func:`gold_table`). Never raises."""
    total = sum(len(columns) for columns in gold.values())
    if len(text) > MAX_ANSWER_CHARS:
        return GridGrade(False, 0, total, "answer_too_long")
    parsed = extract_last_complete_json(text)
    if parsed is None:
        return GridGrade(False, 0, total, "no_json")
    table = parsed.get("solution") if isinstance(parsed, dict) else None
    if table is None:
        return GridGrade(False, 0, total, "no_solution_key")
    right, cells = 0, []
    for house, columns in gold.items():
        row = table.get(house) if isinstance(table, dict) else None
        for column, truth in columns.items():
            predicted = _cell(row.get(column)) if isinstance(row, dict) else None
            cells.append(predicted or "")
            right += predicted is not None and predicted == truth.lower().strip()
    reason = "correct" if right == total else "wrong_cells"
    return GridGrade(True, right, total, reason, tuple(cells))


@dataclass
class SizeSummary:
    """Pooled results of one group of puzzles (a size bucket or all)."""

    puzzles: int = 0
    solved: int = 0
    no_answer: int = 0
    cells_correct: int = 0
    cells_total: int = 0

    @property
    def puzzle_acc(self) -> float:
        """Fraction of puzzles with every cell right."""
        return self.solved / self.puzzles if self.puzzles else 0.0

    @property
    def cell_acc(self) -> float:
        """Fraction of all cells right (unanswered puzzles count in the denominator)."""
        return self.cells_correct / self.cells_total if self.cells_total else 0.0

    @property
    def no_answer_rate(self) -> float:
        """Fraction of puzzles without an extracted solution."""
        return self.no_answer / self.puzzles if self.puzzles else 0.0

    def to_dict(self) -> dict[str, float | int]:
        """Counts and rates, JSON-serialisable."""
        return {
            "puzzles": self.puzzles,
            "solved": self.solved,
            "puzzle_acc": self.puzzle_acc,
            "cell_acc": self.cell_acc,
            "no_answer_rate": self.no_answer_rate,
            "cells_correct": self.cells_correct,
            "cells_total": self.cells_total,
        }


def aggregate(scores: Iterable[Any]) -> dict[str, SizeSummary]:
    """Puzzle accuracy, pooled cell accuracy and no-answer rate per size bucket, plus ``"All"``.

    Args:
        scores: Zebra scores: anything with a ``details`` mapping (``tasks.Score``, a rollout's
            episode record) or such a mapping itself, carrying ``cells_correct``, ``cells_total``,
            ``bucket`` and ``answered`` as :class:`~tasks.zebra.task.ZebraTask` writes them.

    Returns:
        ``{"Small": ..., "Medium": ..., "Large": ..., "XL": ..., "All": ...}`` for the buckets seen,
        in that order.
    """
    groups: dict[str, SizeSummary] = {}
    total = SizeSummary()
    for score in scores:
        details = getattr(score, "details", score)
        bucket = str(details.get("bucket", "unknown"))
        for summary in (groups.setdefault(bucket, SizeSummary()), total):
            summary.puzzles += 1
            summary.solved += bool(details.get("cells_total")) and details.get(
                "cells_correct"
            ) == details.get("cells_total")
            summary.no_answer += not details.get("answered", False)
            summary.cells_correct += int(details.get("cells_correct", 0))
            summary.cells_total += int(details.get("cells_total", 0))
    ordered = {b: groups.pop(b) for b in BUCKET_ORDER if b in groups}
    return {**ordered, **dict(sorted(groups.items())), "All": total}
