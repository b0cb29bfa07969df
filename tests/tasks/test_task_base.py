"""Tests for the task plugin API in ``tasks.base``: Problem, Message, Score and the JSONL I/O."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks import (
    Episode,
    Message,
    Problem,
    Score,
    SingleAnswerTask,
    TaskConfigError,
    load_problems,
    read_json_rows,
    save_problems,
)
from tasks.arith.task import ArithTask
from tasks.pipeline.task import PipelineTask
from tasks.relay.task import RelayTask
from teamtr_core.errors import ConfigError

json_scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
problems_st = st.builds(
    Problem,
    id=st.text(min_size=1, max_size=30),
    data=st.dictionaries(st.text(max_size=10), json_values, max_size=5),
    answer=json_values,
    split=st.sampled_from(["train", "validation", "test"]),
    meta=st.dictionaries(st.text(max_size=10), json_scalars, max_size=4),
)


# ---------------------------------------------------------------- Problem


@settings(max_examples=150, deadline=None)
@given(problems_st)
def test_problem_round_trip_through_json(problem: Problem) -> None:
    encoded = json.dumps(problem.to_dict(), ensure_ascii=False)
    back = Problem.from_dict(json.loads(encoded))
    assert back == problem
    assert back.to_dict() == problem.to_dict()


def test_problem_to_dict_shape() -> None:
    problem = Problem("p1", {"expression": "1 + 2"}, 3, "test", {"digits": 1})
    assert problem.to_dict() == {
        "id": "p1",
        "data": {"expression": "1 + 2"},
        "answer": 3,
        "split": "test",
        "meta": {"digits": 1},
    }
    assert type(problem.to_dict()["data"]) is dict and type(problem.to_dict()["meta"]) is dict


def test_problem_from_dict_defaults_and_id_coercion() -> None:
    problem = Problem.from_dict({"id": 17})
    assert problem.id == "17"
    assert dict(problem.data) == {} and dict(problem.meta) == {}
    assert problem.answer is None and problem.split == "train"


@pytest.mark.parametrize("split", ["dev", "Train", "", "val"])
def test_problem_invalid_split_raises(split: str) -> None:
    with pytest.raises(ValueError) as info:
        Problem("p-bad", split=split)  # type: ignore[arg-type]
    message = str(info.value)
    assert repr(split) in message
    assert "'p-bad'" in message
    assert "train" in message and "validation" in message and "test" in message


def test_problem_from_dict_invalid_split_raises() -> None:
    with pytest.raises(ValueError, match="'dev'"):
        Problem.from_dict({"id": "x", "split": "dev"})


def test_problem_data_and_meta_are_read_only() -> None:
    source = {"expression": "1 + 2"}
    problem = Problem("p", data=source, meta={"level": 3})
    assert isinstance(problem.data, MappingProxyType)
    assert isinstance(problem.meta, MappingProxyType)
    with pytest.raises(TypeError):
        problem.data["expression"] = "2 + 2"  # type: ignore[index]
    with pytest.raises(TypeError):
        problem.meta["level"] = 4  # type: ignore[index]
    with pytest.raises(TypeError):
        del problem.data["expression"]  # type: ignore[attr-defined]
    # The problem holds a copy: mutating the caller's dict does not leak in.
    source["expression"] = "9 + 9"
    assert problem.data["expression"] == "1 + 2"
    # Frozen dataclass: fields cannot be rebound.
    with pytest.raises(AttributeError):
        problem.id = "q"  # type: ignore[misc]
    # to_dict hands out fresh dicts; editing them leaves the problem alone.
    d = problem.to_dict()
    d["data"]["expression"] = "0"
    assert problem.data["expression"] == "1 + 2"


# ---------------------------------------------------------------- Score / Message / Episode


def test_score_to_dict_and_read_only_details() -> None:
    score = Score(1.0, True, "42", {"reason": "correct", "extraction": "answer_tag"})
    assert score.to_dict() == {
        "reward": 1.0,
        "correct": True,
        "answer": "42",
        "details": {"reason": "correct", "extraction": "answer_tag"},
    }
    assert type(score.to_dict()["details"]) is dict
    json.dumps(score.to_dict())
    with pytest.raises(TypeError):
        score.details["reason"] = "x"  # type: ignore[index]


def test_score_defaults() -> None:
    score = Score(0.0, False)
    assert score.to_dict() == {"reward": 0.0, "correct": False, "answer": None, "details": {}}


@settings(max_examples=100, deadline=None)
@given(
    role=st.sampled_from(["agent", "env", "system"]),
    speaker=st.text(max_size=20),
    text=st.text(max_size=200),
)
def test_message_round_trip(role: str, speaker: str, text: str) -> None:
    message = Message(role, speaker, text)  # type: ignore[arg-type]
    data = json.loads(json.dumps(message.to_dict()))
    assert data == {"role": role, "speaker": speaker, "text": text}
    assert Message.from_dict(data) == message


def test_message_is_frozen() -> None:
    message = Message("agent", "alice", "hi")
    with pytest.raises(AttributeError):
        message.text = "bye"  # type: ignore[misc]


def test_episode_holds_fields() -> None:
    problem = Problem("p")
    episode = Episode(problem, [Message("agent", "a", "x")], "x")
    assert episode.state is None and episode.final_text == "x" and episode.problem is problem


def test_task_config_error_lists_problems() -> None:
    err = TaskConfigError("Demo", ["a is bad", "b is bad"])
    assert isinstance(err, ValueError)
    assert err.errors == ["a is bad", "b is bad"]
    assert str(err) == "Invalid Demo arguments (2 problem(s)):\n  - a is bad\n  - b is bad"


# ---------------------------------------------------------------- save_problems / load_problems


def _sample_problems(n: int = 12) -> list[Problem]:
    task = ArithTask(digits=3, operators="+-*", operands=3, split="validation")
    rng = np.random.default_rng(5)
    return [task.sample(rng) for _ in range(n)]


def test_save_load_round_trip(tmp_path: Path) -> None:
    problems = [
        *_sample_problems(),
        Problem(
            "unicode-\u00e9\u4e2d", {"q": "\u2212 5 \U0001f600"}, ["a", 1], "test", {"k": None}
        ),
    ]
    path = tmp_path / "problems.jsonl"
    save_problems(path, problems)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(problems)
    assert "\u4e2d" in lines[-1]  # written as UTF-8, not \\u escapes
    assert load_problems(path) == problems
    assert load_problems(str(path)) == problems


def test_save_empty_and_load(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    save_problems(path, [])
    assert path.read_text(encoding="utf-8") == ""
    assert load_problems(path) == []


def test_load_skips_blank_lines(tmp_path: Path) -> None:
    a, b = _sample_problems(2)
    path = tmp_path / "blanks.jsonl"
    path.write_text(
        "\n\n" + json.dumps(a.to_dict()) + "\n   \n\t\n" + json.dumps(b.to_dict()) + "\n\n",
        encoding="utf-8",
    )
    assert load_problems(path) == [a, b]


@pytest.mark.parametrize(
    "bad_line",
    [
        "not json",
        '{"data": {}}',  # no id
        "[1, 2]",
        '"just a string"',
        "null",
        '{"id": "x", "split": "dev"}',
        '{"id": "x", "data": 5}',
        '{"id": "x", "data": [1, 2]}',
        '{"id": "x"',
    ],
)
def test_load_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str) -> None:
    good = json.dumps(_sample_problems(1)[0].to_dict())
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n\n{good}\n{bad_line}\n{good}\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_problems(path)
    message = str(info.value)
    assert f"{path}:4:" in message  # blank line 2 still counts towards the line number
    assert repr(bad_line) in message  # the offending line is quoted


def test_arith_task_load(tmp_path: Path) -> None:
    problems = _sample_problems(8)
    path = tmp_path / "arith.jsonl"
    save_problems(path, problems)
    task = ArithTask()
    loaded = task.load(path)
    assert [p.to_dict() for p in loaded] == [p.to_dict() for p in problems]
    for problem in loaded:
        assert problem.split == "validation"
        assert task.grade(problem, f"Answer: {problem.answer}").correct
        assert task.prompt(problem).startswith(f"Compute: {problem.data['expression']}\n")


def test_load_reports_every_bad_line_at_once(tmp_path: Path) -> None:
    """Not JSON, not a problem, not UTF-8, a repeated id: each line named, in one error."""
    good = _sample_problems(2)
    path = tmp_path / "bad.jsonl"
    rows = [
        json.dumps(good[0].to_dict()).encode(),
        b"not json",
        json.dumps(good[1].to_dict()).encode(),
        b'{"data": {}}',
        b"\x93\xff binary",
        json.dumps(good[0].to_dict()).encode(),
    ]
    path.write_bytes(b"\n".join(rows) + b"\n")
    with pytest.raises(ConfigError) as info:
        load_problems(path)
    assert [p.split(": ", 1)[0] for p in info.value.errors] == [
        f"{path}:2",
        f"{path}:4",
        f"{path}:5",
        f"{path}:6",
    ]
    message = str(info.value)
    assert f"Invalid data file {path}" in message and "not UTF-8 text (byte 0x93" in message
    assert f"duplicate id {good[0].id!r} (first on line 1)" in message
    assert isinstance(info.value, ValueError)  # loaders that caught ValueError still do


def test_load_lists_the_first_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("nope\n" * 120, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_problems(path)
    assert len(info.value.errors) == 51
    assert info.value.errors[-1] == "... and 70 more (the first 50 shown)"


@pytest.mark.parametrize(
    ("task", "row", "expected"),
    [
        (ArithTask(), {"id": "a", "answer": 3}, "data.expression: expected an expression"),
        (ArithTask(), {"id": "a", "data": {"expression": "1 + 2"}}, "answer: expected an integer"),
        (ArithTask(), {"id": "a", "data": {"expression": "rm -rf"}, "answer": 1}, "data.expr"),
        (PipelineTask(), {"id": "p", "data": {"chain": "7 +5"}}, "answer: expected an integer"),
        (PipelineTask(), {"id": "p", "data": {}, "answer": 12}, "data.chain: expected a chain"),
        (RelayTask(), {"id": "r", "data": {"secret": 9}, "answer": 9}, "data.secret: expected"),
        (RelayTask(), {"id": "r", "data": {"secret": 1}, "answer": 2}, "answer: expected the"),
    ],
)
def test_task_load_checks_what_each_row_needs(
    tmp_path: Path, task: SingleAnswerTask, row: dict, expected: str
) -> None:
    """A row the task cannot use is an error naming its file and line, not a KeyError when it is
    played nor a silent score of 0."""
    path = tmp_path / "rows.jsonl"
    good = task.sample(np.random.default_rng(0)).to_dict()
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        task.load(path)
    (problem,) = [p for p in info.value.errors if expected in p] or [str(info.value)]
    assert problem.startswith(f"{path}:2: problem {row['id']!r}: ")


def test_a_single_answer_task_needs_an_answer_and_a_check_that_trips_is_reported(
    tmp_path: Path,
) -> None:
    class Echo(SingleAnswerTask):
        def sample(self, rng):
            return Problem("e", {"word": "hi"}, "hi")

        def prompt(self, problem):
            return problem.data["word"]

        def grade(self, problem, text):
            return Score(float(text == problem.answer), text == problem.answer)

    class Strict(Echo):
        def check_problem(self, problem):
            return [] if problem.data["word"] else ["data.word: empty"]  # KeyError on no word

    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a", "data": {"word": "hi"}}\n{"id": "b", "answer": "x"}\n')
    with pytest.raises(ConfigError) as info:
        Echo().load(path)
    assert info.value.errors == [
        f"{path}:1: problem 'a': no 'answer': a single-answer task grades against it"
    ]
    with pytest.raises(ConfigError) as info:
        Strict().load(path)
    assert f"{path}:2: problem 'b': unusable row (KeyError: 'word')" in info.value.errors


def test_read_json_rows_collects_every_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\r\nnot json\n\n[1]\n\xff\n{"b": 2}\n')
    read = read_json_rows(path)
    assert [(r.where, r.line, r.value, r.item) for r in read.rows] == [
        (f"{path}:1", 1, {"a": 1}, None),
        (f"{path}:6", 6, {"b": 2}, None),
    ]
    errors = read.errors()
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 4, 5)]
    assert "not valid JSON" in errors[0] and "'not json'" in errors[0]
    assert "expected a JSON object, got list" in errors[1]
    assert "not UTF-8 text (byte 0xff" in errors[2]
    read.add(read.rows[0], "checked by the loader")  # the loader's own findings, in line order
    assert read.errors()[0] == f"{path}:1: checked by the loader"
    assert len(read_json_rows(path, objects=False).rows) == 3  # [1] is a row


def test_read_json_rows_locates_the_items_of_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text('[\n  {"a": 1},\n\n  {"b": [\n 2]},\n  3\n]\n')
    read = read_json_rows(path, layout="array")
    assert [(r.where, r.item, r.value) for r in read.rows] == [
        (f"{path}:2: item 1", 1, {"a": 1}),
        (f"{path}:4: item 2", 2, {"b": [2]}),
    ]
    assert read.errors() == [f"{path}:6: item 3: expected a JSON object, got int: '3'"]
    path.write_text('[\n  {"a": 1}\n  {"b": 2}\n]')  # a missing comma: one error, where it is
    (problem,) = read_json_rows(path, layout="array").errors()
    assert problem.startswith(f"{path}:3: not valid JSON (Expecting ',' delimiter")
    assert not read_json_rows(path, layout="array").rows


def test_read_json_rows_document_layout(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('\n{\n  "a": 1\n}\n')  # one object over several lines: one row
    (row,) = read_json_rows(path, layout="document").rows
    assert (row.where, row.item, row.value) == (f"{path}:2", 1, {"a": 1})
    path.write_text('"0123"\n"4567"\nnope\n')  # not one document: JSON lines
    read = read_json_rows(path, layout="document", objects=False)
    assert [r.value for r in read.rows] == ["0123", "4567"] and len(read.errors()) == 1
    path.write_text('[\n  {"a": 1},\n  {"b": 2}}\n]\n')  # a broken document: one error
    (problem,) = read_json_rows(path, layout="document").errors()
    assert problem.startswith(f"{path}:3: not valid JSON")
