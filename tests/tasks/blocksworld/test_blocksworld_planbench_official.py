"""Against a local PlanBench checkout (skipped without one): set ``PLANBENCH_DIR`` to the
``plan-bench/`` folder of karthikv792/LLMs-Planning.

* every query of ``prompts/blocksworld/task_1_plan_generation.json`` and
  ``task_2_plan_optimality.json`` re-renders exactly from the PDDL instances (given the example
  plan written in the query; ties between optimal plans are broken differently by Fast Downward);
* on PlanBench's recorded GPT-4 answers (``results/blocksworld/gpt-4_chat/``), reading the whole
  reply (``stop_at_plan_end=False``, as its chat evaluation does) gives exactly its verdicts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasks.blocksworld import BlocksworldTask, domain, text
from tasks.blocksworld.pddl import parse_problem

ROOT = Path(os.environ.get("PLANBENCH_DIR", "/nonexistent"))
pytestmark = pytest.mark.skipif(
    not (ROOT / "instances" / "blocksworld" / "generated_basic").is_dir(),
    reason="set PLANBENCH_DIR to a plan-bench/ checkout to compare with the official files",
)
TASKS = ("task_1_plan_generation", "task_2_plan_optimality")


def instance(number: int) -> domain.Instance:
    path = ROOT / "instances" / "blocksworld" / "generated_basic" / f"instance-{number}.pddl"
    return parse_problem(path.read_text(), str(path)).instance


@pytest.mark.parametrize("task_name", TASKS)
def test_official_queries_re_render_exactly(task_name: str) -> None:
    rows = json.loads((ROOT / "prompts" / "blocksworld" / f"{task_name}.json").read_text())
    optimality = "optimality" in task_name
    for row in rows["instances"]:
        (example_id,) = row["example_instance_ids"]
        example_text = row["query"].split("[STATEMENT]")[1].split("[PLAN]", 1)[1]
        example_plan = text.extract_plan(example_text).actions
        rendered = text.render_prompt(
            instance(row["instance_id"]), instance(example_id), example_plan, optimality
        )
        assert rendered == row["query"], row["instance_id"]
        ours = domain.optimal_plan(instance(example_id)).plan
        assert ours is not None and len(ours) == len(example_plan)


@pytest.mark.parametrize("task_name", TASKS)
def test_recorded_gpt4_verdicts_are_reproduced(task_name: str) -> None:
    path = ROOT / "results" / "blocksworld" / "gpt-4_chat" / f"{task_name}.json"
    task = BlocksworldTask(require_optimal="optimality" in task_name, stop_at_plan_end=False)
    problems = {
        p.id.rsplit(":", 1)[-1]: p
        for p in task.load(ROOT / "prompts" / "blocksworld" / f"{task_name}.json")
    }
    rows = json.loads(path.read_text())["instances"]
    for row in rows:
        score = task.grade(problems[str(row["instance_id"])], row["llm_raw_response"])
        assert score.correct == row["llm_correct"], row["instance_id"]
