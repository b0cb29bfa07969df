"""The ``teamtr/ZebraLogic-v0`` plugin: options, sampling and splits, prompt, grading, the scripted
expert, file loading, and whole episodes through the registered environment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import teamtr_env
from adapters.scripted import RandomPolicy, ScriptedExpert
from tasks import Problem, SupportsExpert, TaskConfigError, save_problems
from tasks.base import SPLITS, split_of
from tasks.zebra import ZebraTask
from tasks.zebra.attributes import NAME, POOL
from tasks.zebra.expert import SOLVED_REASONING, answer_json
from tasks.zebra.task import answer_template
from teamtr_core.errors import ConfigError
from teamtr_env.evaluation import evaluate
from teamtr_env.runners import Runner

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "zebra" / "grid_mode.jsonl"


def context(task: ZebraTask, problem: Problem, *messages: tuple[str, str]) -> str:
    """A context as the team protocol renders it."""
    body = "".join(f"### {who}\n{text}\n" for who, text in messages)
    return f"You are the solver.\n### Problem\n{task.prompt(problem)}\n{body}### critic\n"


# ---- options ---------------------------------------------------------------------------------------


def test_every_bad_option_is_reported_at_once() -> None:
    with pytest.raises(TaskConfigError) as err:
        ZebraTask(houses=7, attributes=True, sizes=["3x3", "9x2", "abc", [2]], split="dev")
    text = str(err.value)
    assert "6 problem(s)" in text
    for part in ("houses must be", "attributes must be", "'9x2'", "'abc'", "[2]", "split must"):
        assert part in text
    with pytest.raises(TaskConfigError, match="expected a list of sizes"):
        ZebraTask(sizes=5)  # type: ignore[arg-type]
    with pytest.raises(TaskConfigError, match="at least one size"):
        ZebraTask(sizes=[])
    with pytest.raises(TaskConfigError, match="data_split"):
        ZebraTask(data_split="dev")


def test_sizes_option_forms() -> None:
    assert ZebraTask(sizes="2x2, 3*4").sizes == ((2, 2), (3, 4))
    assert ZebraTask(sizes=[[5, 6], "6X6"]).sizes == ((5, 6), (6, 6))
    assert ZebraTask(houses=4, attributes=5).sizes == ((4, 5),)
    task = ZebraTask(sizes=["2x3", "4x2"])
    rng = np.random.default_rng(0)
    assert {task.sample(rng).meta["size"] for _ in range(12)} == {"2*3", "4*2"}


# ---- sampling, prompt, grading -------------------------------------------------------------------


def test_sampling_is_seeded_and_split_partitioned() -> None:
    seen: dict[str, set[str]] = {}
    for split in SPLITS:
        task = ZebraTask(split=split)
        problems = [task.sample(np.random.default_rng(s)) for s in range(6)]
        again = [task.sample(np.random.default_rng(s)) for s in range(6)]
        assert [p.to_dict() for p in problems] == [p.to_dict() for p in again]
        assert all(p.split == split == split_of(p.id) for p in problems)
        seen[split] = {p.id for p in problems}
    assert not (seen["train"] & seen["test"]) and not (seen["validation"] & seen["test"])


def test_problem_fields() -> None:
    problem = ZebraTask(houses=4, attributes=3).sample(np.random.default_rng(3))
    assert problem.id.startswith("zebra-gen-4x3-")
    assert problem.meta["size"] == "4*3" and problem.meta["bucket"] == "Medium"
    assert problem.meta["zeroeval_group"] == "Hard" and problem.meta["gold_available"]
    assert problem.answer["header"][:2] == ["House", "Name"]
    assert [r[0] for r in problem.answer["rows"]] == ["1", "2", "3", "4"]
    assert problem.data["puzzle"].startswith("There are 4 houses, numbered 1 to 4")
    assert sum(problem.data["clue_kinds"].values()) == problem.meta["clues"]
    json.dumps(problem.to_dict())  # JSON-serialisable


def test_prompt_is_puzzle_then_instruction_and_template() -> None:
    task = ZebraTask()
    problem = task.sample(np.random.default_rng(1))
    prompt = task.prompt(problem)
    assert prompt.startswith(problem.data["puzzle"] + "\n\n\n# Instruction\n\nNow please solve")
    assert prompt.endswith(answer_template(problem.data["header"], 3))
    template = json.loads(prompt[prompt.index('{\n    "reasoning"') :])
    assert template["solution"]["House 3"] == {h: "___" for h in problem.data["header"]}


def test_grade_scores_and_details() -> None:
    task = ZebraTask()
    problem = task.sample(np.random.default_rng(2))
    right = answer_json(problem.answer, "because")
    score = task.grade(problem, "My reasoning...\n" + right)
    assert score.correct and score.reward == 1.0
    assert dict(score.details) == {
        "reason": "correct",
        "answered": True,
        "cells_correct": 9,
        "cells_total": 9,
        "size": "3*3",
        "bucket": "Small",
    }
    assert json.loads(score.answer or "") == [
        c.lower() for r in problem.answer["rows"] for c in r[1:]
    ]
    nothing = task.grade(problem, "I give up")
    assert (nothing.correct, nothing.answer, nothing.details["reason"]) == (False, None, "no_json")
    assert nothing.details["cells_total"] == 9 and not nothing.details["answered"]
    broken = Problem("x", {"puzzle": "p"}, answer={"header": ["Name"], "rows": []})
    assert task.grade(broken, right).details["reason"] == "invalid_gold_answer"
    redacted = Problem(problem.id, problem.data, problem.answer, "test", {"gold_available": False})
    assert task.grade(redacted, right).details["reason"] == "no_gold_solution"


# ---- scripted expert -----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "m"), [(2, 2), (3, 3), (4, 4), (5, 4), (6, 6)])
def test_expert_solves_every_generated_puzzle_from_the_text(n: int, m: int) -> None:
    task = ZebraTask(houses=n, attributes=m)
    assert isinstance(task, SupportsExpert)
    rng = np.random.default_rng(n * 7 + m)
    for _ in range(5 if n * m <= 16 else 2):
        problem = task.sample(rng)
        ctx = context(task, problem, ("solver", '{"solution": {"House 1": {"Name": "x"}}}'))
        reply = task.expert_reply(ctx, rng, make_error=False)
        assert task.grade(problem, reply).correct, problem.id
        wrong = task.grade(problem, task.expert_reply(ctx, rng, make_error=True))
        assert not wrong.correct
        assert wrong.details["cells_correct"] == n * m - 2  # two values swapped


def test_expert_falls_back_to_the_gold_only_when_the_text_defeats_it() -> None:
    task = ZebraTask()
    problems = {p.id: p for p in task.load(FIXTURE)}
    rng = np.random.default_rng(0)
    unreadable = problems["lgp-test-2x3-3"]  # "The Swedish person" for the value `swede`
    reply = task.expert_reply(context(task, unreadable), rng, make_error=False, problem=unreadable)
    assert "recalled" in reply and task.grade(unreadable, reply).correct
    readable = problems["lgp-test-3x3-7"]  # "born in January" for `jan`: read from the text
    reply = task.expert_reply(context(task, readable), rng, make_error=False, problem=readable)
    assert "recalled" not in reply and task.grade(readable, reply).correct
    # Without the problem (a caller with only the text) the unreadable puzzle stays unsolved.
    assert "cannot find" in task.expert_reply(context(task, unreadable), rng, make_error=False)


def test_expert_answer_fits_the_default_message_limit() -> None:
    """The longest possible 6x6 answer: the five attributes with the longest values."""
    specs = sorted(POOL, key=lambda s: sum(sorted(map(len, s.values))[-6:]) + 6 * len(s.header))
    header = ["House", NAME.header, *(s.header for s in specs[-5:])]
    columns = [sorted(s.values, key=len)[-6:] for s in (NAME, *specs[-5:])]
    rows = [[str(h + 1), *(col[h] for col in columns)] for h in range(6)]
    reply = answer_json({"header": header, "rows": rows}, SOLVED_REASONING)
    assert len(reply) < 2000  # TeamProtocol.max_message_chars default


# ---- loading -------------------------------------------------------------------------------------


def test_load_official_jsonl_fixture() -> None:
    problems = ZebraTask().load(FIXTURE)
    assert [p.id for p in problems] == ["lgp-test-2x2-0", "lgp-test-3x3-7", "lgp-test-2x3-3"]
    assert all(p.split == "test" and p.data["source"] == "zebralogic" for p in problems)
    assert [p.meta["size"] for p in problems] == ["2*2", "3*3", "2*3"]
    assert [p.meta["bucket"] for p in problems] == ["Small"] * 3
    assert problems[1].data["header"] == ["Name", "Birthday", "CarModel"]
    assert ZebraTask(data_split="validation").load(FIXTURE)[0].split == "validation"


def test_load_json_list_and_project_jsonl(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    listed = tmp_path / "grid_mode.json"
    listed.write_text(json.dumps(rows, indent=2))
    assert [p.id for p in ZebraTask().load(listed)] == [r["id"] for r in rows]
    task = ZebraTask()
    generated = [task.sample(np.random.default_rng(s)) for s in range(3)]
    project = tmp_path / "project.jsonl"
    save_problems(project, generated)
    assert [p.to_dict() for p in task.load(project)] == [p.to_dict() for p in generated]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(project.read_text() + FIXTURE.read_text())
    assert len(task.load(mixed)) == 6


def test_redacted_public_rows_load_but_cannot_be_graded(tmp_path: Path) -> None:
    row = json.loads(FIXTURE.read_text().splitlines()[0])
    row["solution"]["rows"] = [["1", "___", "___"], ["2", "___", "___"]]
    path = tmp_path / "public.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (problem,) = ZebraTask().load(path)
    assert problem.meta["gold_available"] is False
    score = ZebraTask().grade(problem, answer_json(problem.answer, "x"))
    assert not score.correct and score.details["reason"] == "no_gold_solution"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "size": "2*2"\n', "jsonl:1: not valid JSON"),
        ('\n{"id": "a", "puzzle": "p"}\n', r"jsonl:2: .*missing \['solution'\]"),
        ("[1]", r"jsonl:1: item 1: expected a JSON object"),
        ("[1", "jsonl:1: not valid JSON .* JSON list of rows"),
        ("", "no rows found"),
    ],
)
def test_load_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        ZebraTask().load(path)
    assert str(path) in str(err.value)


def test_load_validates_official_rows(tmp_path: Path) -> None:
    row = json.loads(FIXTURE.read_text().splitlines()[1])
    changes: list[tuple[dict[str, object], str]] = [
        ({"size": "3*4"}, "does not match the solution's 3 rows x 3 columns"),
        ({"puzzle": ""}, "'puzzle' must be a non-empty string"),
        ({"solution": {"header": ["Name"], "rows": []}}, "header must start with 'House'"),
        ({"solution": [1]}, "'solution' must be an object"),
    ]
    for change, message in changes:
        path = tmp_path / "row.jsonl"
        path.write_text(json.dumps({**row, **change}) + "\n")
        with pytest.raises(ValueError, match=message):
            ZebraTask().load(path)


# ---- whole episodes through the registered environment -------------------------------------------


def run_eval(policy: object, k: int = 2, n_problems: int = 10, **make: object) -> float:
    def env_fn() -> teamtr_env.TeamEnv:
        return teamtr_env.make("teamtr/ZebraLogic-v0", **make)

    runner = Runner(env_fn, policy, progress=False)  # type: ignore[arg-type]
    fixed = env_fn().problems
    chosen = list(fixed) if fixed is not None else runner.sample_problems(n_problems, seed=0)
    return evaluate(runner, chosen, k=k, seed=0).metrics[f"avg@{k}"].mean


def test_registered_env_scripted_expert_random_policy_and_data_path() -> None:
    task = teamtr_env.make("teamtr/ZebraLogic-v0").task
    assert run_eval(ScriptedExpert(task, error_rate=0.0, seed=0)) == 1.0
    noisy = run_eval(ScriptedExpert(task, error_rate=0.3, seed=0), k=4, n_problems=40)
    assert 0.55 <= noisy <= 0.85
    assert run_eval(RandomPolicy(seed=0)) == 0.0
    expert = ScriptedExpert(task, error_rate=0.0, seed=0)
    assert run_eval(expert, data_path=str(FIXTURE)) == 1.0


def test_every_bad_line_is_reported_at_once(tmp_path: Path) -> None:
    """Not JSON, a duplicate id, an empty puzzle, a missing solution, not an object: each named
    with its file:line in one error."""
    good = json.loads(FIXTURE.read_text().splitlines()[1])
    other = json.loads(FIXTURE.read_text().splitlines()[2])
    lines = [
        json.dumps(good),
        '{"id": "a", "size": "2*2"',
        json.dumps(other),
        json.dumps({**other, "id": "blank", "puzzle": "  "}),
        json.dumps(good),
        json.dumps({"id": "b", "puzzle": "p"}),
        "3",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        ZebraTask().load(path)
    errors = err.value.errors
    assert [p.split(": ", 1)[0] for p in errors] == [f"{path}:{n}" for n in (2, 4, 5, 6, 7)]
    assert "not valid JSON" in errors[0]
    assert "'puzzle' must be a non-empty string" in errors[1]
    assert f"duplicate id {good['id']!r} (first on line 1)" in errors[2]
    assert "missing ['solution']" in errors[3]
    assert "expected a JSON object, got int" in errors[4]


def test_every_bad_item_of_a_json_list_is_named_with_its_line(tmp_path: Path) -> None:
    good = json.loads(FIXTURE.read_text().splitlines()[1])
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([good, {"id": "x"}, good], indent=1))
    with pytest.raises(ConfigError) as err:
        ZebraTask().load(path)
    first, second = err.value.errors
    text = path.read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if '"id": "x"' in t)
    assert first.startswith(f"{path}:{line - 1}: item 2: ") and "missing" in first
    assert second.startswith(f"{path}:") and ": item 3: duplicate id" in second


def test_the_list_of_bad_lines_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "puzzle": "p"}) + "\n" for i in range(60)))
    with pytest.raises(ConfigError) as err:
        ZebraTask().load(path)
    assert len(err.value.errors) == 51
    assert err.value.errors[49].startswith(f"{path}:50: ")
    assert err.value.errors[-1] == "... and 10 more (the first 50 shown)"
