"""Loading MATH-500, AIME 2024 / 2025 (aliases, DeepScaleR's copy) and project JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tasks.base import save_problems
from tasks.math import MathTask, load_math_file
from teamtr_core.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "math"


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_math500_fixture() -> None:
    problems = load_math_file(FIXTURES / "math500.jsonl")
    assert len(problems) == 8
    first = problems[0]
    assert first.id == "math500:test/precalculus/807.json"
    assert first.answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert first.split == "test"
    assert first.meta["subject"] == "Precalculus"
    assert first.meta["level"] == 2
    assert first.meta["source"] == "math500"
    assert first.data["problem"].startswith("Convert the point")
    assert "\\boxed" in first.data["solution"]
    assert {p.meta["subject"] for p in problems} >= {"Algebra", "Geometry", "Number Theory"}


def test_aime2024_fixture() -> None:
    problems = load_math_file(FIXTURES / "aime2024.jsonl")
    assert [p.id for p in problems] == ["aime2024:60", "aime2024:61", "aime2024:62"]
    assert [p.answer for p in problems] == ["33", "50", "994"]
    assert problems[0].meta == {"source": "aime2024", "gold_from": "answer", "year": "2024"}


def test_aime2025_alias_fixture() -> None:
    problems = load_math_file(FIXTURES / "aime2025.jsonl")
    assert [p.id for p in problems] == ["aime2025:1", "aime2025:2", "aime2025:3"]
    assert problems[0].answer == "28"  # an integer answer becomes text
    assert problems[0].data["problem"].startswith("Find the sum")
    assert all(p.meta["source"] == "aime2025" for p in problems)  # from the file name


def test_deepscaler_copy(tmp_path: Path) -> None:
    row = {
        "problem": "Find $1+1$.",
        "solution": "It is $\\boxed{2}$.",
        "answer": "2",
        "year": 2025,
        "aime_number": "II",
        "problem_number": 4,
    }
    (problem,) = load_math_file(_write(tmp_path / "x.jsonl", [row]))
    assert problem.id == "aime2025:2025-II-4"
    assert problem.meta["year"] == 2025


def test_missing_answer_takes_the_last_box_of_the_solution(tmp_path: Path) -> None:
    row = {"problem": "p", "solution": "first \\boxed{1}, then \\boxed{\\frac{1}{2}}."}
    (problem,) = load_math_file(_write(tmp_path / "x.jsonl", [row]))
    assert problem.answer == "\\frac{1}{2}"
    assert problem.meta["gold_from"] == "solution_boxed"
    assert problem.id == "x:line1"


def test_split_override(tmp_path: Path) -> None:
    problems = MathTask().load(FIXTURES / "aime2024.jsonl", split="validation")
    assert {p.split for p in problems} == {"validation"}


def test_project_jsonl_round_trip(tmp_path: Path) -> None:
    task = MathTask(kinds="system,quadratic")
    rng = np.random.default_rng(0)
    problems = [task.sample(rng) for _ in range(5)]
    path = tmp_path / "gen.jsonl"
    save_problems(path, problems)
    assert task.load(path) == problems


@pytest.mark.parametrize(
    ("rows", "lineno", "fragment"),
    [
        (['{"problem": "p", "answer": "1"}', "{not json"], 2, "not valid JSON"),
        (['{"problem": "p", "answer": "1"}', "[1, 2]"], 2, "expected a JSON object"),
        (['{"answer": "1"}'], 1, "'problem' (or 'question')"),
        (['{"problem": "p", "solution": "no box"}'], 1, "no gold answer"),
        (['{"problem": "p", "answer": ""}'], 1, "no gold answer"),
        (
            [
                '{"id": 1, "problem": "p", "answer": "1"}',
                '{"id": 1, "problem": "q", "answer": "2"}',
            ],
            2,
            "duplicate id",
        ),
        (['{"id": "a", "data": {"question": "p"}, "answer": "1"}'], 1, "data['problem']"),
        (['{"id": "a", "data": {"problem": "p"}, "answer": "1", "split": "dev"}'], 1, "split"),
    ],
)
def test_malformed_rows_name_file_and_line(
    tmp_path: Path, rows: list[str], lineno: int, fragment: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"bad.jsonl:{lineno}:") as info:
        load_math_file(path)
    assert fragment in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no problems found"):
        load_math_file(path)


def test_every_bad_line_is_reported_at_once(tmp_path: Path) -> None:
    """Not JSON, an empty question, a duplicate id, no gold, not an object: each named with its
    file:line in one error, the duplicate with the line that had the id first."""
    path = tmp_path / "bad.jsonl"
    lines = [
        '{"id": 1, "problem": "What is 1 + 1?", "answer": "2"}',
        "{not json",
        '{"id": 2, "problem": "   ", "answer": "3"}',
        '{"id": 1, "problem": "Again?", "answer": "4"}',
        "",
        '{"id": 5, "question": "No gold?"}',
        "[1, 2]",
        '{"id": "p", "data": {"problem": ""}, "answer": "1"}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_math_file(path)
    errors = info.value.errors
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 3, 4, 6, 7, 8)]
    assert "not valid JSON" in errors[0]
    assert "non-empty string in 'problem' (or 'question'); got '   '" in errors[1]
    assert "duplicate id 'bad:1' (first on line 1)" in errors[2]
    assert "no gold answer" in errors[3]
    assert "expected a JSON object, got list" in errors[4]
    assert "non-empty string data['problem']" in errors[5]
    assert isinstance(info.value, ValueError)  # callers that caught ValueError still do


def test_the_list_of_bad_lines_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    rows = [{"id": i, "problem": "", "answer": "1"} for i in range(60)]
    _write(path, [{"id": "ok", "problem": "p", "answer": "1"}, *rows])
    with pytest.raises(ConfigError) as info:
        load_math_file(path)
    assert len(info.value.errors) == 51
    assert info.value.errors[0].startswith(f"{path}:2: ")
    assert info.value.errors[49].startswith(f"{path}:51: ")
    assert info.value.errors[-1] == "... and 10 more (the first 50 shown)"
