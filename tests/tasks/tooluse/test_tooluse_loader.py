"""Task files: tau-bench JSON / JSONL / Python modules, the project's JSONL, unsupported tools."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tasks.base import Problem, save_problems
from tasks.tooluse import ToolUseTask, UnsupportedToolsWarning, load_task_file
from tasks.tooluse.tasks_data import ToolTask, builtin_tasks, parse_record
from teamtr_core.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tooluse"


def test_builtin_tasks_are_twelve_valid_records() -> None:
    tasks = builtin_tasks()
    assert len(tasks) == 12
    assert len({t.id for t in tasks}) == 12
    for task in tasks:
        assert task.actions and task.user_id and task.instruction
        assert ToolTask.from_problem(task.to_problem("test", "builtin")) == task


def test_tau_json_list_skips_unsupported_tools_with_a_warning() -> None:
    with pytest.warns(UnsupportedToolsWarning, match=r"tau_tasks-002 \(uses book_reservation\)"):
        problems = load_task_file(FIXTURES / "tau_tasks.json")
    assert [p.id for p in problems] == ["tooluse:tau_tasks-000", "tooluse:tau_tasks-001"]
    assert all(p.split == "test" for p in problems)
    # gold `respond` actions are dropped: they change nothing in the database
    assert [a["name"] for a in problems[1].answer["actions"]] == [
        "find_user_id_by_name_zip",
        "get_user_details",
    ]
    assert problems[1].answer["outputs"] == ["10.0"]


def test_unsupported_error_mode_lists_the_tasks() -> None:
    with pytest.raises(ValueError, match=r"1 of 3 task\(s\) use tools .* lacks"):
        load_task_file(FIXTURES / "tau_tasks.json", unsupported="error")


def test_tau_python_module_is_read_without_running_it() -> None:
    problems = load_task_file(FIXTURES / "tau_retail_tasks.py", split="validation")
    assert len(problems) == 2 and {p.split for p in problems} == {"validation"}
    first = ToolTask.from_problem(problems[0])
    assert first.user_id == "diego_silva_1004"
    assert first.instruction.startswith("You are Diego Silva in 98103. You want to return")
    assert first.actions[-1].kwargs["item_ids"] == ["4105000002"]
    assert problems[1].answer["outputs"] == ["6"]


def test_python_module_with_code_is_refused_and_nothing_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"evil_tasks\.py:\d+: only Task\(\.\.\.\)"):
        load_task_file(FIXTURES / "evil_tasks.py")
    assert not (tmp_path / "TOOLUSE_PWNED").exists()


def test_tau_jsonl_records() -> None:
    problems = load_task_file(FIXTURES / "tau_tasks.jsonl")
    assert [p.data["user_id"] for p in problems] == ["farid_haddad_1006", "ada_park_1001"]


def test_project_jsonl_round_trip(tmp_path: Path) -> None:
    problems = [t.to_problem("train", "builtin") for t in builtin_tasks()]
    path = tmp_path / "tooluse.jsonl"
    save_problems(path, problems)
    loaded = load_task_file(path)
    assert [p.to_dict() for p in loaded] == [p.to_dict() for p in problems]  # keeps its splits


def test_project_jsonl_with_a_bad_row_names_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    save_problems(path, [Problem("x", data={"user_id": "u"}, answer={"actions": "nope"})])
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: problem 'x': .*instruction"):
        load_task_file(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2", r"not valid JSON"),
        ('[{"user_id": 3, "actions": {}}]', r"tasks\.txt:1: item 1: user_id: expected a string"),
        ("def f(:\n", r":1: neither JSON nor a Python task module"),
        ("x = 1\n", r"no Task\(\.\.\.\) entries"),
        ('{"user_id": "u"}\n{oops\n', r":2: not valid JSON"),
        ('TASKS = [Task(user_id="u", **extra)]\n', r"only Task\(\.\.\.\)"),
    ],
)
def test_malformed_files_name_file_and_place(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tasks.txt"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_task_file(path)


def test_a_binary_file_names_the_file_without_a_bogus_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.bin"
    path.write_bytes(b"\x00\x01garbage\x00")
    with pytest.raises(ValueError) as info:
        load_task_file(path)
    assert str(info.value).startswith(f"{path}: neither JSON") and ":None" not in str(info.value)


def test_parse_record_lists_every_problem() -> None:
    errors = parse_record(
        {"user_id": 1, "instruction": "", "actions": [{"name": 2}], "outputs": [3]}, "t"
    )
    assert isinstance(errors, list) and len(errors) == 4


def test_task_load_warns_about_users_missing_from_the_database() -> None:
    task = ToolUseTask()
    with pytest.warns(UserWarning, match="name users missing from the database"):
        task.load(FIXTURES / "mini_tasks.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(task.load(FIXTURES / "tau_retail_tasks.py")) == 2


def test_db_dir_and_task_file_options() -> None:
    task = ToolUseTask(
        db_dir=str(FIXTURES / "mini_db"), task_file=str(FIXTURES / "mini_tasks.json")
    )
    assert set(task.db["users"]) == {"zoe_li_9001"}
    assert [p.id for p in task.problem_pool()] == ["tooluse:mini_tasks-000"]


def test_every_bad_line_of_tau_jsonl_is_reported_at_once(tmp_path: Path) -> None:
    """Not JSON, not an object, an empty instruction, malformed actions: each named with its
    file:line in one error (a record's every problem)."""
    good = (FIXTURES / "tau_tasks.jsonl").read_text().splitlines()[0]
    record = json.loads(good)
    lines = [
        good,
        "{oops",
        "[1]",
        json.dumps({**record, "instruction": "  "}),
        json.dumps({**record, "actions": [{"name": 3}], "outputs": [1]}),
    ]
    path = tmp_path / "tau.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as info:
        load_task_file(path)
    errors = info.value.errors
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 3, 4, 5, 5)]
    assert "not valid JSON" in errors[0] and "expected a JSON object, got list" in errors[1]
    assert "instruction: expected a non-empty string" in errors[2]
    assert "actions[0]: expected" in errors[3] and "outputs: expected" in errors[4]


def test_every_bad_line_of_project_jsonl_is_reported_at_once(tmp_path: Path) -> None:
    """The project's JSONL: not JSON, a duplicate id, an empty instruction, in one error."""
    first, second = (t.to_problem("test", "builtin").to_dict() for t in builtin_tasks()[:2])
    lines = [
        json.dumps(first),
        "not json",
        json.dumps(first),
        json.dumps({**second, "data": {**second["data"], "instruction": ""}}),
    ]
    path = tmp_path / "project.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as info:
        load_task_file(path)
    errors = info.value.errors
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 3, 4)]
    assert "not valid JSON" in errors[0]
    assert f"duplicate id {first['id']!r} (first on line 1)" in errors[1]
    assert "instruction: expected a non-empty string" in errors[2]


def test_the_list_of_bad_records_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.json"
    path.write_text(json.dumps([{"user_id": "u", "instruction": "", "actions": []}] * 60))
    with pytest.raises(ConfigError) as info:
        load_task_file(path)
    errors = info.value.errors
    assert len(errors) == 51 and errors[0].startswith(f"{path}:1: item 1: instruction")
    assert errors[-1] == "... and 10 more (the first 50 shown)"
