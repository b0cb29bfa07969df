"""Loaders: the official formats (hand-written fixtures), the project's JSONL, JSONL of official
rows, the bundled demo cases, split labels and error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks import save_problems
from tasks.arbench import (
    ArbenchDataError,
    DetectiveCaseTask,
    GuessingNumbersTask,
    SituationPuzzleTask,
)
from tasks.arbench import data as arbench_data

FIXTURES = Path(__file__).parents[2] / "fixtures" / "arbench"
BUNDLED = Path(arbench_data.__file__).parent / "data"


def test_gn_official_list_of_secrets() -> None:
    problems = GuessingNumbersTask().load(FIXTURES / "gn.json")
    assert [p.answer for p in problems] == ["8362", "1058", "0521", "9763", "3182"]
    assert all(p.split == "test" for p in problems)
    assert problems[2].id == "arbench-gn:0521" and not problems[2].data  # nothing shown


def test_sp_official_items() -> None:
    problems = SituationPuzzleTask().load(FIXTURES / "sp.json")
    raw = json.loads((FIXTURES / "sp.json").read_text())
    assert len(problems) == 3 and all(p.split == "test" for p in problems)
    first = problems[0]
    assert first.id == "arbench-sp:1" and first.answer == raw[0]["bottom"]
    assert first.data["surface"] == raw[0]["surface"]
    assert first.data["key_question"] == raw[0]["key_question"]
    assert first.meta == {"supernatural": False, "someone_dies": False}


def test_dc_official_cases() -> None:
    problems = DetectiveCaseTask().load(FIXTURES / "dc.json")
    raw = json.loads((FIXTURES / "dc.json").read_text())
    assert [p.answer for p in problems] == ["C", "B", "E"]
    for problem, row in zip(problems, raw):
        names = [s["name"] for s in row["initial_information"]["suspect"]]
        assert names[row["label"]] == row["murderer"] == problem.data["murderer"]
        assert len(row["suspects"]) == 5
        assert sum(bool(s.get("is_murderer")) for s in row["suspects"]) == 1


def test_data_split_option_relabels_official_rows() -> None:
    problems = SituationPuzzleTask(data_split="validation").load(FIXTURES / "sp.json")
    assert {p.split for p in problems} == {"validation"}


def test_project_jsonl_round_trip(tmp_path: Path) -> None:
    for task, name in ((SituationPuzzleTask(), "sp.json"), (DetectiveCaseTask(), "dc.json")):
        problems = task.load(FIXTURES / name)
        path = tmp_path / f"{name}.jsonl"
        save_problems(path, problems)
        assert task.load(path) == problems
    gn = GuessingNumbersTask()
    problems = gn.load(FIXTURES / "gn.json")
    save_problems(tmp_path / "gn.jsonl", problems)
    assert gn.load(tmp_path / "gn.jsonl") == problems


def test_official_rows_one_per_line(tmp_path: Path) -> None:
    rows = json.loads((FIXTURES / "sp.json").read_text())
    path = tmp_path / "sp.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert SituationPuzzleTask().load(path) == SituationPuzzleTask().load(FIXTURES / "sp.json")
    path.write_text('"0123"\n"4567"\n')
    assert [p.answer for p in GuessingNumbersTask().load(path)] == ["0123", "4567"]


@pytest.mark.parametrize(
    ("task", "content", "message"),
    [
        (GuessingNumbersTask(), '["0123", "1123"]', r"item 2: .*4 distinct digits"),
        (GuessingNumbersTask(), "[]", "no problems found"),
        (SituationPuzzleTask(), '[{"surface": "s"}]', r"item 1: SP item is missing \['bottom'\]"),
        (SituationPuzzleTask(), '{"surface": "s", "bottom": 3}', "must be strings"),
        (SituationPuzzleTask(), '{"a": 1}\nnot json\n', r"bad\.json:2: not valid JSON"),
        (DetectiveCaseTask(), '[{"time": "x"}]', r"item 1: DC case is missing"),
    ],
)
def test_bad_files_name_the_file_and_row(
    tmp_path: Path, task: object, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ArbenchDataError, match=message) as err:
        task.load(path)  # type: ignore[attr-defined]
    assert str(path) in str(err.value)


def test_dc_label_must_match_the_murderer(tmp_path: Path) -> None:
    rows = json.loads((FIXTURES / "dc.json").read_text())
    rows[0]["label"] = 0
    path = tmp_path / "dc.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(ArbenchDataError, match="item 1: 'murderer'"):
        DetectiveCaseTask().load(path)
    del rows[0]["label"]  # a case without label: derived from the murderer's name
    path.write_text(json.dumps(rows))
    assert DetectiveCaseTask().load(path)[0].answer == "C"


def test_bundled_demo_cases_are_the_fixtures_and_the_default_pool() -> None:
    for name in ("sp.json", "dc.json"):
        assert json.loads((BUNDLED / name).read_text()) == json.loads((FIXTURES / name).read_text())
    import numpy as np

    task = SituationPuzzleTask(split="test")
    drawn = {task.sample(np.random.default_rng(s)).id for s in range(30)}
    assert drawn == {"arbench-sp:1", "arbench-sp:2", "arbench-sp:3"}
    assert task.sample(np.random.default_rng(0)).split == "test"
    dc = DetectiveCaseTask(data_file=str(FIXTURES / "dc.json"))
    assert dc.sample(np.random.default_rng(0)).split == "train"


def test_every_bad_row_is_reported_at_once(tmp_path: Path) -> None:
    """Not JSON, a duplicate id, an empty surface, a missing field: each named with its file:line
    in one error."""
    rows = json.loads((FIXTURES / "sp.json").read_text())
    lines = [
        json.dumps({**rows[0], "index": 7}),
        "not json",
        json.dumps({**rows[1], "index": 8, "surface": " "}),
        json.dumps({**rows[1], "index": 7}),
        json.dumps({"surface": "s", "index": 9}),
        json.dumps({**rows[1], "index": 10}),
    ]
    path = tmp_path / "sp.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ArbenchDataError) as err:
        SituationPuzzleTask().load(path)
    errors = err.value.errors
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 3, 4, 5)]
    assert "not valid JSON" in errors[0]
    assert "'surface' and 'bottom' must be non-empty" in errors[1]
    assert "duplicate id 'arbench-sp:7' (first on line 1)" in errors[2]
    assert "SP item is missing ['bottom']" in errors[3]
    assert isinstance(err.value, ValueError)


def test_a_broken_json_list_is_one_error_where_it_breaks(tmp_path: Path) -> None:
    path = tmp_path / "dc.json"
    text = (FIXTURES / "dc.json").read_text()
    path.write_text(text.replace("}", "}}", 1))  # one stray brace in a pretty-printed file
    with pytest.raises(ArbenchDataError) as err:
        DetectiveCaseTask().load(path)
    (problem,) = err.value.errors
    assert problem.startswith(f"{path}:") and "not valid JSON" in problem


def test_the_list_of_bad_rows_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "gn.json"
    path.write_text(json.dumps(["0123", *(["1123"] * 60)], indent=0))
    with pytest.raises(ArbenchDataError) as err:
        GuessingNumbersTask().load(path)
    errors = err.value.errors
    assert len(errors) == 51 and errors[0].startswith(f"{path}:3: item 2: expected a secret")
    assert errors[-1] == "... and 10 more (the first 50 shown)"
