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

Every bad line is reported at once: one ``ConfigError`` (a ``ValueError``) lists each as
``file:line: ...`` with the fix (the first 50, then a count of the rest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.base import SPLITS, Problem
from tasks.data_files import read_json_rows
from tasks.math.extract import last_boxed
from teamtr_core.errors import ConfigError

_ID_FIELDS = ("unique_id", "id", "problem_idx")
EXPECTED = (
    "one JSON object per line: a MATH-500 / AIME row ('problem' and 'answer') or a project row "
    "(tasks.save_problems)"
)


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


def _official(row: dict[str, Any], path: Path, lineno: int, split: str) -> Problem | list[str]:
    """The problem of an official row, or what is wrong with it."""
    issues = []
    text = row.get("problem", row.get("question"))
    if not isinstance(text, str) or not text.strip():
        got = repr(text) if isinstance(text, str) else type(text).__name__
        issues.append(
            f"expected a non-empty string in 'problem' (or 'question'); got {got}. Keys seen: "
            f"{sorted(row)[:12]}."
        )
    answer = _gold_text(row.get("answer"))
    solution = row.get("solution")
    how = "answer"
    if answer is None and isinstance(solution, str):
        answer = last_boxed(solution).answer
        how = "solution_boxed"
    if answer is None:
        issues.append(
            "no gold answer: 'answer' is missing or empty and 'solution' has no closed "
            "\\boxed{}. Fix: add an 'answer' string."
        )
    if issues:
        return issues
    assert isinstance(text, str) and answer is not None
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


def _project(row: dict[str, Any]) -> Problem | list[str]:
    """The problem of a project row, or what is wrong with it."""
    problem = Problem.from_dict(row)
    issues = []
    text = problem.data.get("problem")
    if not isinstance(text, str) or not text.strip():
        got = repr(text) if isinstance(text, str) else type(text).__name__
        issues.append(f"project row without a non-empty string data['problem'] (got {got}).")
    answer = _gold_text(problem.answer)
    if answer is None:
        issues.append(f"project row with no usable 'answer': {problem.answer!r}.")
    if issues:
        return issues
    assert answer is not None
    return Problem(problem.id, problem.data, answer, problem.split, problem.meta)


def load_math_file(path: str | Path, *, split: str = "test") -> list[Problem]:
    """Loads a MATH-500 / AIME / project JSONL file (formats in the module docstring).

    Args:
        path: the JSONL file.
        split: the split official rows are labelled with (project rows keep their own).

    Raises:
        ConfigError: (a ``ValueError``) listing every bad line at once, each as ``file:line: ...``
            (not UTF-8, not JSON, not an object, no statement, no gold, a malformed field, a
            duplicate id: which line had it first), the first 50 and a count of the rest; or a
            file with no problems.
        OSError: the file cannot be read.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    path = Path(path)
    read = read_json_rows(path, expected=EXPECTED)
    problems: list[Problem] = []
    for row in read.rows:
        try:
            is_project = isinstance(row.value.get("data"), dict) and "id" in row.value
            made = (
                _project(row.value) if is_project else _official(row.value, path, row.line, split)
            )
        except (KeyError, TypeError, ValueError) as exc:
            read.add(row, f"malformed row ({exc!s:.200}).")
            continue
        if isinstance(made, list):
            for issue in made:
                read.add(row, issue)
            continue
        read.keep(row, made, problems)
    if read.bad:
        raise ConfigError(f"data file {path}", read.errors())
    if not problems:
        raise ConfigError(f"data file {path}", [f"{path}: no problems found (the file is empty)."])
    return problems
