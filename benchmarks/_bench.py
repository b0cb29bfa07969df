"""Helpers shared by the benchmark scripts (imported as ``_bench`` when a script runs from this
folder, e.g. ``python benchmarks/zebra_speed.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def median_time(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def markdown_table(title: str, header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    """A ``### title`` heading and a padded Markdown table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([f"### {title}", line(header), rule, *(line(r) for r in rows)])


def grading_rates(
    grader: Any, cases: Sequence[tuple[str, Any, str, int]]
) -> list[tuple[str, float, str]]:
    """For each ``(name, problem, reply, count)``: grades ``reply`` ``count`` times with
    ``grader.grade`` and returns ``(name, replies/s, the distinct score reasons)``."""
    rows = []
    for name, problem, reply, count in cases:
        reasons = set()
        start = time.perf_counter()
        for _ in range(count):
            reasons.add(str(grader.grade(problem, reply).details["reason"]))
        rows.append((name, count / (time.perf_counter() - start), ",".join(sorted(reasons))))
    return rows
