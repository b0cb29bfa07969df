"""Blocksworld problems as ``tasks.Problem`` rows, and the loaders of PlanBench's files.

A problem's ``data`` holds PDDL-style strings so that the project's JSONL stays readable::

    {"blocks": ["a", "b", "c", "d"],
     "init": ["(clear a)", "(clear b)", "(clear d)", "(handempty)", "(on b c)", ...],
     "goal": ["(on c b)"],
     "example": {"blocks": [...], "init": [...], "goal": [...], "plan": ["(unstack b c)", ...]}}

and ``answer`` is ``{"optimal_length": 4, "optimal_plan": ["(unstack b c)", ...]}``
(``optimal_length`` is ``None`` when the search cap was reached).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks.base import Problem, Split, load_problems
from tasks.blocksworld import text
from tasks.blocksworld.domain import (
    DEFAULT_MAX_EXPANSIONS,
    Action,
    Instance,
    below_from_facts,
    fact_str,
    optimal_plan,
    parse_action,
    parse_fact,
    simulate,
)
from tasks.blocksworld.pddl import (
    INSTANCE_FILE,
    PddlError,
    check_domain,
    instance_files,
    parse_problem,
    read_text,
)
from tasks.data_files import listed
from teamtr_core.errors import ConfigError

MAX_JSON_BYTES = 200_000_000
LOAD_MAX_EXPANSIONS = 500_000
"""Search cap when computing optimal lengths of loaded instances (12 blocks need < 100k)."""

DEFAULT_EXAMPLE = Instance(
    ("a", "b", "c", "d"),
    frozenset(
        {
            ("handempty",),
            ("ontable", "a"),
            ("on", "b", "c"),
            ("ontable", "c"),
            ("ontable", "d"),
            ("clear", "a"),
            ("clear", "b"),
            ("clear", "d"),
        }
    ),
    frozenset({("on", "c", "b")}),
)
"""The one-shot example of generated problems: PlanBench's ``generated_basic/instance-1``, the
example of its first query."""
DEFAULT_EXAMPLE_PLAN = [
    Action("unstack", ("b", "c")),
    Action("put-down", ("b",)),
    Action("pick-up", ("c",)),
    Action("stack", ("c", "b")),
]


def instance_to_data(instance: Instance) -> dict[str, Any]:
    """``{"blocks", "init", "goal"}`` with sorted PDDL strings."""
    return {
        "blocks": list(instance.blocks),
        "init": sorted(map(fact_str, instance.init)),
        "goal": sorted(map(fact_str, instance.goal)),
    }


def instance_from_data(data: Mapping[str, Any]) -> Instance:
    """The inverse of :func:`instance_to_data`, checked.

    Raises:
        ValueError: unknown block names, malformed facts or an inconsistent initial state.
    """
    blocks = tuple(data["blocks"])
    if not blocks or any(b not in text.COLOURS for b in blocks) or len(set(blocks)) != len(blocks):
        raise ValueError(f"blocks must be distinct names among a..l, got {list(blocks)}")
    init = frozenset(parse_fact(str(f)) for f in data["init"])
    goal = frozenset(parse_fact(str(f)) for f in data["goal"])
    below_from_facts(blocks, init)
    unknown = sorted({a for f in goal for a in f[1:]} - set(blocks))
    if unknown:
        raise ValueError(f"goal names objects {unknown} that are not blocks {list(blocks)}")
    return Instance(blocks, init, goal)


def example_from_data(data: Mapping[str, Any]) -> tuple[Instance, list[Action]]:
    """The one-shot example (instance and plan) of a problem's ``data``.

    Raises:
        ValueError: a malformed example, or an example plan that does not solve it.
    """
    example = data["example"]
    instance = instance_from_data(example)
    plan = [parse_action(str(a)) for a in example["plan"]]
    check = simulate(instance, plan)
    if not check.valid:
        raise ValueError(f"the example plan is not valid ({check.reason}, step {check.step})")
    return instance, plan


def make_problem(
    instance: Instance,
    problem_id: str,
    split: Split,
    example: tuple[Instance, Sequence[Action]] | None = None,
    source: str = "generated",
    max_expansions: int = DEFAULT_MAX_EXPANSIONS,
) -> Problem:
    """A ``Problem`` with the optimal plan computed by :func:`optimal_plan`.

    Raises:
        ValueError: if the goal is unreachable (the search exhausted the state space) or the
            example plan does not solve the example.
    """
    result = optimal_plan(instance, max_expansions=max_expansions)
    if result.plan is None and not result.exhausted:
        raise ValueError("the goal is unreachable from the initial state")
    ex_instance, ex_plan = example or (DEFAULT_EXAMPLE, DEFAULT_EXAMPLE_PLAN)
    check = simulate(ex_instance, ex_plan)
    if not check.valid:
        raise ValueError(f"the example plan is not valid ({check.reason}, step {check.step})")
    plan = [str(a) for a in result.plan] if result.plan is not None else None
    length = len(result.plan) if result.plan is not None else None
    return Problem(
        id=problem_id,
        data={
            **instance_to_data(instance),
            "example": {**instance_to_data(ex_instance), "plan": [str(a) for a in ex_plan]},
        },
        answer={"optimal_length": length, "optimal_plan": plan},
        split=split,
        meta={"blocks": len(instance.blocks), "optimal_length": length, "source": source},
    )


# ---------------------------------------------------------------- loaders


def load_path(path: str | Path, split: Split = "test", optimality: bool = False) -> list[Problem]:
    """Problems from a PlanBench instance file, a directory of them, a PlanBench prompts JSON
    file, or the project's JSONL (detected by suffix / content).

    * ``instance-N.pddl`` (or any problem ``.pddl``): one problem with the default example.
    * a directory: every ``instance-N.pddl`` by N; as in PlanBench's prompt generation, instance
      ``N``'s example is the previous instance, so the first serves only as an example (a
      directory with one instance uses the default example). Domain files in it are checked.
    * ``task_1_plan_generation.json`` / ``task_2_plan_optimality.json`` (PlanBench ``prompts/``):
      one problem per query, example and all, checked to re-render to the query exactly.
    * ``.jsonl``: rows written by ``tasks.save_problems``, checked.

    Loading computes every optimal plan; ``teamtr_env.make(..., data_path=...)`` loads a file once
    per process (the registry caches loaded problem sets), not once per environment.

    Raises:
        ValueError: naming the file (and line) of what cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    return _load_path(path, split, optimality)


def _load_path(path: Path, split: Split, optimality: bool) -> list[Problem]:
    if path.is_dir():
        return _load_directory(path, split)
    if path.suffix.lower() == ".pddl":
        parsed = parse_problem(read_text(path), str(path))
        return [_pddl_problem(parsed.instance, path, split, None)]
    if path.suffix.lower() == ".json":
        return _load_prompts_json(path, split, optimality)
    return load_problems(path, check=_row_errors)


def _row_errors(problem: Problem) -> list[str]:
    """Why a project-JSONL row is not a Blocksworld problem (empty: it is one)."""
    try:
        instance_from_data(problem.data)
        example_from_data(problem.data)
    except (KeyError, TypeError, ValueError) as exc:
        return [f"not a Blocksworld problem: {exc}"]
    return []


def _pddl_problem(
    instance: Instance,
    path: Path,
    split: Split,
    example: tuple[Instance, Sequence[Action]] | None,
) -> Problem:
    try:
        return make_problem(
            instance,
            f"planbench:{path.stem}",
            split,
            example,
            source="planbench",
            max_expansions=LOAD_MAX_EXPANSIONS,
        )
    except ValueError as exc:
        raise PddlError(f"{path}:1: {exc}") from exc


def _load_directory(directory: Path, split: Split) -> list[Problem]:
    files = instance_files(directory)
    if not files:
        raise ValueError(
            f"{directory}: no instance files; expected PlanBench's instance-N.pddl "
            f"(pattern {INSTANCE_FILE.pattern})"
        )
    for path in sorted(directory.glob("*.pddl")):
        if not INSTANCE_FILE.fullmatch(path.name) and "domain" in path.name.lower():
            check_domain(read_text(path), str(path))
    instances = [(path, parse_problem(read_text(path), str(path)).instance) for _, path in files]
    if len(instances) == 1:
        return [_pddl_problem(instances[0][1], instances[0][0], split, None)]
    problems = []
    for (ex_path, ex_instance), (path, instance) in itertools.pairwise(instances):
        ex_result = optimal_plan(ex_instance, max_expansions=LOAD_MAX_EXPANSIONS)
        if ex_result.plan is None:
            raise PddlError(f"{ex_path}:1: no plan found for this instance (used as an example)")
        problems.append(_pddl_problem(instance, path, split, (ex_instance, ex_result.plan)))
    return problems


def _load_prompts_json(path: Path, split: Split, optimality: bool) -> list[Problem]:
    """The queries of a PlanBench prompts file, every bad one reported at once (a
    :class:`ConfigError` listing each instance, the first 50 and a count of the rest)."""
    try:
        rows = json.loads(read_text(path, MAX_JSON_BYTES))["instances"]
        if not isinstance(rows, list):
            raise TypeError(f"'instances' is a {type(rows).__name__}, not a list")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path}: expected PlanBench's prompts JSON {{'task': ..., 'instances': [{{'query': "
            f"...}}]}} ({exc})"
        ) from exc
    problems = []
    bad: list[str] = []
    other_task: list[str] = []
    first: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            bad.append(f"{path}: instances[{i}]: expected an object, got {type(row).__name__}")
            continue
        where = f"{path}: instance_id {row.get('instance_id')!r}"
        query = str(row.get("query", ""))
        task_two = query.startswith(text.DOMAIN_INTRO_COST)
        if task_two != optimality:
            want = "true" if task_two else "false"
            other_task.append(
                f"{where}: this is a PlanBench "
                f"{'task 2 (optimality)' if task_two else 'task 1'} prompt; load it with "
                f"require_optimal={want}"
            )
            continue
        try:
            problem = _prompt_problem(path, row, query, split, optimality)
        except ValueError as exc:
            bad.append(f"{where}: {exc}")
            continue
        if problem.id in first:
            bad.append(
                f"{where}: duplicate instance_id (first at instances[{first[problem.id]}]); a "
                "repeated problem is not an independent one: remove it"
            )
            continue
        first[problem.id] = i
        problems.append(problem)
    if other_task and len(other_task) == len(rows):  # the whole file is of the other task
        raise ConfigError(f"data file {path}", [other_task[0]])
    if bad or other_task:
        raise ConfigError(f"data file {path}", listed(other_task + bad))
    return problems


def _prompt_problem(
    path: Path, row: Mapping[str, Any], query: str, split: Split, optimality: bool
) -> Problem:
    """The problem of one PlanBench query, checked to re-render to the query exactly.

    Raises:
        ValueError: saying what is wrong with it.
    """
    parts = query.split("[STATEMENT]")
    example = text.parse_statement(parts[1]) if len(parts) == 3 else None
    instance = text.parse_statement(parts[-1]) if len(parts) == 3 else None
    if example is None or instance is None:
        raise ValueError("expected one example and one query [STATEMENT]")
    plan_text = parts[1].split("[PLAN]", 1)[-1]
    example_plan = text.extract_plan(plan_text).actions
    if text.render_prompt(instance, example, example_plan, optimality) != query:
        raise ValueError("the query does not follow PlanBench's one-shot template")
    below_from_facts(instance.blocks, instance.init)
    return make_problem(
        instance,
        f"planbench:{path.stem}:{row.get('instance_id')}",
        split,
        (example, example_plan),
        source="planbench",
        max_expansions=LOAD_MAX_EXPANSIONS,
    )
