"""Reading MATH-500, AIME 2024 / 2025 and the project's own JSONL into problems.

Each line is one JSON object; the format is detected per line:

* project JSONL (:func:`tasks.base.save_problems`): an ``id`` and a ``data`` object holding
  ``problem``. Its own ``split`` is kept.
* official rows: the statement in ``problem`` (or its alias ``question``), the gold in ``answer``
  (a string or an integer). If ``answer`` is missing or empty, the last ``\\boxed{}`` of
  ``solution`` is used. Identifiers: ``unique_id`` (MATH-500), ``id`` (AIME 2024), ``problem_idx``
  (AIME 2025 copies), ``year``/``aime_number``/``problem_number`` (DeepScaleR's copy), else the
  line number. ``meta`` carries ``source`` (``"math500"``, ``"aime<year>"`` or the file's stem),
  ``subject`` and ``level`` when given, and ``year``.

Any malformed line raises ``ValueError`` naming the file, the line and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tasks.base import SPLITS, Problem
from tasks.math.extract import last_boxed

_ID_FIELDS = ("unique_id", "id", "problem_idx")


def _fail(path: Path, lineno: int, message: str) -> ValueError:
    return ValueError(f"{path}:{lineno}: {message}")


def _gold_text(value: Any) -> str | None:
    """The gold as LaTeX text: strings stripped, integers (and integral floats) written out."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, float)):
        text = str(value).strip()
        return text or None
    return None


def _source(row: dict[str, Any], path: Path) -> str:
    if "unique_id" in row or "subject" in row or "level" in row:
        return "math500"
    year = row.get("year")
    if isinstance(year, (int, str)) and str(year).strip().isdigit():
        return f"aime{str(year).strip()}"
    return path.stem.lower()


def _raw_id(row: dict[str, Any], lineno: int) -> str:
    for name in _ID_FIELDS:
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    if row.get("problem_number") is not None:
        parts = [row.get("year"), row.get("aime_number"), row.get("problem_number")]
        return "-".join(str(p) for p in parts if p is not None)
    return f"line{lineno}"


def _official(row: dict[str, Any], path: Path, lineno: int, split: str) -> Problem:
    text = row.get("problem", row.get("question"))
    if not isinstance(text, str) or not text.strip():
        raise _fail(
            path,
            lineno,
            "expected a non-empty string in 'problem' (or 'question'); got "
            f"{type(text).__name__}. Keys seen: {sorted(row)[:12]}.",
        )
    answer = _gold_text(row.get("answer"))
    solution = row.get("solution")
    how = "answer"
    if answer is None and isinstance(solution, str):
        answer = last_boxed(solution).answer
        how = "solution_boxed"
    if answer is None:
        raise _fail(
            path,
            lineno,
            "no gold answer: 'answer' is missing or empty and 'solution' has no closed \\boxed{}. "
            "Fix: add an 'answer' string.",
        )
    source = _source(row, path)
    meta: dict[str, Any] = {"source": source, "gold_from": how}
    for name in ("subject", "level", "year"):
        if row.get(name) is not None:
            meta[name] = row[name]
    data: dict[str, Any] = {"problem": text}
    if isinstance(solution, str):
        data["solution"] = solution
    return Problem(
        id=f"{source}:{_raw_id(row, lineno)}",
        data=data,
        answer=answer,
        split=split,  # type: ignore[arg-type]
        meta=meta,
    )


def _project(row: dict[str, Any], path: Path, lineno: int) -> Problem:
    problem = Problem.from_dict(row)
    if not isinstance(problem.data.get("problem"), str):
        raise _fail(path, lineno, "project row without a string data['problem'].")
    answer = _gold_text(problem.answer)
    if answer is None:
        raise _fail(path, lineno, f"project row with no usable 'answer': {problem.answer!r}.")
    return Problem(problem.id, problem.data, answer, problem.split, problem.meta)


def load_math_file(path: str | Path, *, split: str = "test") -> list[Problem]:
    """Loads a MATH-500 / AIME / project JSONL file (formats in the module docstring).

    Args:
        path: the JSONL file.
        split: the split official rows are labelled with (project rows keep their own).

    Raises:
        ValueError: naming the file and line of the first malformed row, a duplicate id, or a file
            with no problems.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    path = Path(path)
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _fail(path, lineno, f"not valid JSON ({exc.msg}): {line[:80]!r}") from exc
            if not isinstance(row, dict):
                raise _fail(path, lineno, f"expected a JSON object, got {type(row).__name__}.")
            try:
                is_project = isinstance(row.get("data"), dict) and "id" in row
                problem = (
                    _project(row, path, lineno)
                    if is_project
                    else _official(row, path, lineno, split)
                )
            except (KeyError, TypeError) as exc:
                raise _fail(path, lineno, f"malformed row ({exc}).") from exc
            except ValueError as exc:
                if str(exc).startswith(f"{path}:"):
                    raise
                raise _fail(path, lineno, str(exc)) from exc
            if problem.id in seen:
                raise _fail(
                    path, lineno, f"duplicate id {problem.id!r} (first on line {seen[problem.id]})."
                )
            seen[problem.id] = lineno
            problems.append(problem)
    if not problems:
        raise ValueError(f"{path}: no problems found (the file is empty).")
    return problems
