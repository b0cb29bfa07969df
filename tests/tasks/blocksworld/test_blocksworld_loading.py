"""Loading PlanBench files (PDDL instances, directories, prompts JSON) and the project's JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import teamtr_env
from tasks import load_problems, save_problems
from tasks.blocksworld import BlocksworldTask, pddl, text
from tasks.blocksworld.domain import Instance, optimal_plan, parse_action
from tasks.blocksworld.pddl import PddlError, parse_problem
from teamtr_core.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "blocksworld"


def fixture(name: str) -> Instance:
    path = FIXTURES / name
    return parse_problem(path.read_text(), str(path)).instance


def test_fixture_instances_parse() -> None:
    inst = fixture("instance-2.pddl")
    assert inst.blocks == ("a", "b", "c", "d")
    assert ("on", "c", "b") in inst.init and ("handempty",) in inst.init
    assert inst.goal == {("on", "a", "d"), ("on", "d", "c")}
    pddl.check_domain((FIXTURES / "domain.pddl").read_text(), "domain.pddl")


def test_single_file_uses_the_default_example_and_the_test_split() -> None:
    (problem,) = BlocksworldTask().load(FIXTURES / "instance-1.pddl")
    assert problem.id == "planbench:instance-1"
    assert problem.split == "test"
    assert problem.answer["optimal_length"] == 4
    assert problem.meta == {"blocks": 4, "optimal_length": 4, "source": "planbench"}
    prompt = BlocksworldTask().prompt(problem)
    assert "the orange block is on top of the blue block.\n\nMy plan is as follows" in prompt


def test_directory_chains_examples_like_planbench() -> None:
    problems = BlocksworldTask().load(FIXTURES, split="validation")
    assert [p.id for p in problems] == ["planbench:instance-2", "planbench:instance-3"]
    assert {p.split for p in problems} == {"validation"}
    assert [p.answer["optimal_length"] for p in problems] == [8, 8]
    example = problems[0].data["example"]
    assert example["goal"] == ["(on b a)"]  # instance-1 is the example of instance-2
    assert example["plan"] == ["(unstack d b)", "(put-down d)", "(pick-up b)", "(stack b a)"]
    assert problems[1].data["example"]["init"] == problems[0].data["init"]


def test_instance_files_are_ordered_numerically(tmp_path: Path) -> None:
    for n in (10, 2, 1):
        (tmp_path / f"instance-{n}.pddl").write_text((FIXTURES / "instance-3.pddl").read_text())
    (tmp_path / "notes.txt").write_text("ignored")
    ids = [p.id for p in BlocksworldTask().load(tmp_path)]
    assert ids == ["planbench:instance-2", "planbench:instance-10"]


def test_pddl_round_trip() -> None:
    inst = fixture("instance-3.pddl")
    again = parse_problem(pddl.problem_to_pddl(inst), "written").instance
    assert again == inst


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "(define (problem p)\n(:objects a b)\n(:init (handempty)",
            r"x\.pddl:3: '\(' is never closed",
        ),
        ("(define (problem p))\n)", r"x\.pddl:2: unexpected '\)'"),
        (
            "(define (problem p)\n(:objects a x1)\n(:init)\n(:goal (and)))",
            r"x\.pddl:2: objects must be distinct PlanBench block names a\.\.l",
        ),
        (
            "(define (problem p)\n(:objects a b)\n(:init (handempty) (ontable a) (on b a)\n"
            "(clear b))\n(:goal (and\n(on a z))))",
            r"x\.pddl:6: \['z'\] not declared",
        ),
        (
            "(define (problem p)\n(:objects a b)\n(:init (handempty) (ontable a) (ontable b)\n"
            "(clear a))\n(:goal (and (on a b))))",
            r"x\.pddl:3: the initial state is not a blocksworld state: clear/handempty",
        ),
        (
            "(define (problem p)\n(:objects a b)\n(:init (ontable a) (ontable b) (clear a) (clear b)"
            " (handempty) (above a b))\n(:goal (on a b)))",
            r"x\.pddl:3: unknown atom \(above a b\)",
        ),
        ("(define (problem p)\n(:objects a b))", r"x\.pddl:1: missing :init, :goal"),
        ("(define (domain blocksworld-4ops))", r"x\.pddl:1: this is a domain file"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.pddl"
    path.write_text(content)
    with pytest.raises(PddlError, match=message):
        BlocksworldTask().load(path)


def test_wrong_domain_file_in_a_directory_is_reported(tmp_path: Path) -> None:
    for name in ("instance-1.pddl", "instance-2.pddl"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    domain = (FIXTURES / "domain.pddl").read_text().replace("unstack", "lift")
    (tmp_path / "domain.pddl").write_text(domain)
    with pytest.raises(PddlError, match="not the 4-operator Blocksworld domain"):
        BlocksworldTask().load(tmp_path)


def test_missing_paths_and_empty_directories(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        BlocksworldTask().load(tmp_path / "nope.pddl")
    with pytest.raises(ValueError, match="no instance files"):
        BlocksworldTask().load(tmp_path)


def test_unreachable_goal_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "instance-1.pddl"
    content = (FIXTURES / "instance-1.pddl").read_text().replace("(on b a)", "(on b a)\n(on a b)")
    path.write_text(content)
    with pytest.raises(PddlError, match="unreachable"):
        BlocksworldTask().load(path)


def test_project_jsonl_round_trip(tmp_path: Path) -> None:
    task = BlocksworldTask()
    problems = task.load(FIXTURES)
    save_problems(tmp_path / "bw.jsonl", problems)
    assert task.load(tmp_path / "bw.jsonl") == problems
    rows = [p.to_dict() for p in load_problems(tmp_path / "bw.jsonl")]
    rows[1]["data"]["init"] = ["(on a a)"]
    (tmp_path / "bad.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(
        ValueError, match=r"bad\.jsonl:2: problem 'planbench:instance-3': not a Blocksworld"
    ):
        task.load(tmp_path / "bad.jsonl")


def planbench_json(path: Path, optimality: bool) -> Path:
    """A prompts file in PlanBench's layout (``prompts/blocksworld/task_1_plan_generation.json``)."""
    example, query = fixture("instance-1.pddl"), fixture("instance-2.pddl")
    plan = optimal_plan(example).plan
    assert plan is not None
    rows = [
        {
            "instance_id": 2,
            "example_instance_ids": [1],
            "query": text.render_prompt(query, example, plan, optimality),
            "ground_truth_plan": "(pick-up a)\n",
        }
    ]
    name = "task_2_plan_optimality" if optimality else "task_1_plan_generation"
    out = path / f"{name}.json"
    out.write_text(json.dumps({"task": name, "prompt_type": "oneshot", "instances": rows}))
    return out


@pytest.mark.parametrize("optimality", [False, True])
def test_planbench_prompts_json_reproduces_the_query(tmp_path: Path, optimality: bool) -> None:
    path = planbench_json(tmp_path, optimality)
    task = BlocksworldTask(require_optimal=optimality)
    (problem,) = task.load(path)
    query = json.loads(path.read_text())["instances"][0]["query"]
    assert task.prompt(problem) == query
    assert problem.id == f"planbench:{path.stem}:2"
    assert problem.answer["optimal_length"] == 8
    with pytest.raises(ValueError, match=f"require_optimal={str(optimality).lower()}"):
        BlocksworldTask(require_optimal=not optimality).load(path)


def test_planbench_prompts_json_rejects_other_templates(tmp_path: Path) -> None:
    path = planbench_json(tmp_path, False)
    data = json.loads(path.read_text())
    data["instances"][0]["query"] = data["instances"][0]["query"].replace("[PLAN]\n", "[PLAN]\n\n")
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="instance_id 2: the query does not follow"):
        BlocksworldTask().load(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="expected PlanBench's prompts JSON"):
        BlocksworldTask().load(path)


def test_example_plan_from_json_must_solve_the_example(tmp_path: Path) -> None:
    path = planbench_json(tmp_path, False)
    data = json.loads(path.read_text())
    wrong = text.render_plan([parse_action("(pick-up a)")])
    query = data["instances"][0]["query"]
    start = query.index("[PLAN]\n") + len("[PLAN]\n")
    end = query.index("[PLAN END]") + len("[PLAN END]")
    data["instances"][0]["query"] = query[:start] + wrong + query[end:]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="example plan is not valid"):
        BlocksworldTask().load(path)


def test_loads_are_cached_until_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "instance-1.pddl"
    path.write_text((FIXTURES / "instance-1.pddl").read_text())
    first = teamtr_env.make("teamtr/Blocksworld-v0", data_path=str(path)).problems
    again = teamtr_env.make("teamtr/Blocksworld-v0", data_path=str(path)).problems
    assert first == again and first[0] is again[0]
    assert BlocksworldTask().load(path, split="train")[0].split == "train"
    path.write_text((FIXTURES / "instance-2.pddl").read_text() + "\n; edited\n")
    edited = teamtr_env.make("teamtr/Blocksworld-v0", data_path=str(path)).problems
    assert edited[0].answer["optimal_length"] == 8


def test_every_bad_instance_of_a_prompts_json_is_reported_at_once(tmp_path: Path) -> None:
    """A query off the template, one without its statements, a repeated instance, an item that is
    not an object: each named in one error."""
    path = planbench_json(tmp_path, False)
    data = json.loads(path.read_text())
    good = data["instances"][0]
    off_template = {
        **good,
        "instance_id": 3,
        "query": good["query"].replace("[PLAN]\n", "[PLAN]\n\n"),
    }
    data["instances"] += [off_template, {"instance_id": 4, "query": "no statement"}, good, 7]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        BlocksworldTask().load(path)
    errors = info.value.errors
    assert len(errors) == 4
    assert (
        errors[0]
        == f"{path}: instance_id 3: the query does not follow PlanBench's one-shot template"
    )
    assert errors[1].startswith(f"{path}: instance_id 4: expected one example")
    assert errors[2].startswith(
        f"{path}: instance_id 2: duplicate instance_id (first at instances[0])"
    )
    assert errors[3] == f"{path}: instances[4]: expected an object, got int"


def test_the_list_of_bad_instances_is_capped(tmp_path: Path) -> None:
    path = planbench_json(tmp_path, False)
    data = json.loads(path.read_text())
    data["instances"] += [{"instance_id": i, "query": "x"} for i in range(10, 70)]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        BlocksworldTask().load(path)
    assert len(info.value.errors) == 51
    assert info.value.errors[-1] == "... and 10 more (the first 50 shown)"
