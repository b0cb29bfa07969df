"""STRIPS rules, plan simulation and optimal search, cross-checked against pyperplan 2.1."""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from pyperplan.grounding import ground
from pyperplan.pddl.parser import Parser
from pyperplan.search import breadth_first_search

from tasks.blocksworld import domain, pddl, states
from tasks.blocksworld.domain import Action, Instance, below_from_facts, facts_from_below

NAMES = tuple("abcdefgh")


def random_instance(n: int, rng: np.random.Generator) -> Instance:
    """Uniform initial state, goal = the on facts of a second uniform state (maybe trivial)."""
    names = NAMES[:n]
    target = facts_from_below(names, states.sample_state(n, rng))
    goal = frozenset(f for f in target if f[0] == "on")
    return Instance(names, facts_from_below(names, states.sample_state(n, rng)), goal)


def example() -> Instance:
    """b on c; a, c, d on the table; goal: c on b (PlanBench's first example)."""
    init = facts_from_below("abcd", (domain.TABLE, 2, domain.TABLE, domain.TABLE))
    return Instance(tuple("abcd"), init, frozenset({("on", "c", "b")}))


def plan_of(*texts: str) -> list[Action]:
    return [domain.parse_action(t) for t in texts]


# ---------------------------------------------------------------- rules and simulation


def test_schema_matches_the_domain_file() -> None:
    pre, add, delete = domain.schema(Action("unstack", ("a", "b")))
    assert pre == {("on", "a", "b"), ("clear", "a"), ("handempty",)}
    assert add == {("holding", "a"), ("clear", "b")}
    assert delete == pre
    pre, add, delete = domain.schema(Action("put-down", ("a",)))
    assert (pre, delete) == ({("holding", "a")}, {("holding", "a")})
    assert add == {("clear", "a"), ("handempty",), ("ontable", "a")}


def test_simulate_valid_plan() -> None:
    plan = plan_of("(unstack b c)", "(put-down b)", "(pick-up c)", "(stack c b)")
    assert domain.simulate(example(), plan) == domain.PlanCheck(True, "valid")


def test_simulate_reports_the_first_inapplicable_step_and_its_missing_preconditions() -> None:
    check = domain.simulate(example(), plan_of("(unstack b c)", "(pick-up c)"))
    assert (check.valid, check.reason, check.step) == (False, "inapplicable_action", 2)
    assert check.unsatisfied == ("(handempty)",)


def test_simulate_goal_not_reached_lists_the_unmet_goal() -> None:
    check = domain.simulate(example(), plan_of("(unstack b c)", "(put-down b)"))
    assert (check.reason, check.step, check.unsatisfied) == (
        "goal_not_reached",
        None,
        ("(on c b)",),
    )


def test_simulate_rejects_objects_that_are_not_blocks() -> None:
    check = domain.simulate(example(), plan_of("(pick-up l)"))
    assert (check.reason, check.step, check.unsatisfied) == (
        "inapplicable_action",
        1,
        ("object l",),
    )


def test_empty_plan_is_valid_exactly_when_the_goal_already_holds() -> None:
    inst = example()
    assert not domain.simulate(inst, []).valid
    done = Instance(inst.blocks, inst.init, frozenset({("on", "b", "c")}))
    assert domain.simulate(done, []).valid


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({("ontable", "a"), ("on", "b", "a"), ("on", "c", "a")}, "more than one block is on a"),
        ({("on", "a", "b"), ("on", "b", "a"), ("ontable", "c")}, "cycle"),
        ({("ontable", "a"), ("ontable", "b")}, "block c has no position"),
        ({("ontable", "a"), ("on", "a", "b"), ("ontable", "b"), ("ontable", "c")}, "two positions"),
        (
            {("ontable", "a"), ("ontable", "b"), ("ontable", "c"), ("handempty",)},
            "clear/handempty facts contradict",
        ),
    ],
)
def test_inconsistent_states_are_named(facts: set, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        below_from_facts("abc", facts)


# ---------------------------------------------------------------- search


def bfs_distances_to_goal(inst: Instance) -> dict[tuple[int, ...], int]:
    """Exact remaining plan length of every state reachable from the initial state."""
    start = below_from_facts(inst.blocks, inst.init)
    seen, order, queue = {start}, [start], deque([start])
    edges: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    while queue:
        s = queue.popleft()
        edges[s] = [t for _, t in domain.successors(s)]
        for t in edges[s]:
            if t not in seen:
                seen.add(t)
                order.append(t)
                queue.append(t)
    goal = inst.goal
    dist = {s: 0 for s in order if goal <= facts_from_below(inst.blocks, s)}
    reverse: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for s, ts in edges.items():
        for t in ts:
            reverse.setdefault(t, []).append(s)
    queue = deque(dist)
    while queue:
        t = queue.popleft()
        for s in reverse.get(t, ()):
            if s not in dist:
                dist[s] = dist[t] + 1
                queue.append(s)
    return dist


def test_lower_bound_is_admissible_on_every_reachable_state() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    for n in (3, 4, 5):
        for _ in range(6):
            inst = random_instance(n, rng)
            index = {b: i for i, b in enumerate(inst.blocks)}
            goal_on = {index[f[1]]: index[f[2]] for f in inst.goal}
            goal_under = {index[f[2]]: index[f[1]] for f in inst.goal}
            for s, d in bfs_distances_to_goal(inst).items():
                assert domain.lower_bound(s, goal_on, goal_under) <= d, (inst, s, d)
                checked += 1
    assert checked > 1000


def test_astar_matches_breadth_first_lengths() -> None:
    rng = np.random.default_rng(4)
    for n in (3, 4, 5, 6):
        for _ in range(10):
            inst = random_instance(n, rng)
            fast = domain.optimal_plan(inst)
            slow = domain.optimal_plan(inst, use_heuristic=False)
            assert fast.plan is not None and slow.plan is not None
            assert len(fast.plan) == len(slow.plan)
            assert domain.simulate(inst, fast.plan).valid
            assert fast.expanded <= slow.expanded


def test_unreachable_goal_and_search_cap() -> None:
    inst = example()
    impossible = Instance(inst.blocks, inst.init, frozenset({("on", "a", "b"), ("on", "b", "a")}))
    result = domain.optimal_plan(impossible)
    assert (result.plan, result.exhausted) == (None, False)
    capped = domain.optimal_plan(random_instance(8, np.random.default_rng(5)), max_expansions=1)
    assert capped.plan is None and capped.exhausted


def test_eight_blocks_are_solved_quickly() -> None:
    rng = np.random.default_rng(6)
    for _ in range(10):
        result = domain.optimal_plan(random_instance(8, rng))
        assert result.plan is not None and result.expanded < 100_000


# ---------------------------------------------------------------- pyperplan cross-check


def pyperplan_task(inst: Instance, tmp: Path):
    (tmp / "domain.pddl").write_text(pddl.DOMAIN_PDDL)
    (tmp / "problem.pddl").write_text(pddl.problem_to_pddl(inst))
    parser = Parser(str(tmp / "domain.pddl"), str(tmp / "problem.pddl"))
    problem = parser.parse_problem(parser.parse_domain())
    return ground(problem, remove_irrelevant_operators=False)


def pyperplan_verdict(task, plan: list[Action]) -> tuple[bool, int | None]:
    """(valid, first inapplicable step) by applying pyperplan's ground operators."""
    ops = {op.name: op for op in task.operators}
    state = task.initial_state
    for step, action in enumerate(plan, 1):
        op = ops.get(str(action))
        if op is None or not op.applicable(state):
            return False, step
        state = op.apply(state)
    return task.goal_reached(state), None


def random_plan(inst: Instance, rng: np.random.Generator, length: int) -> list[Action]:
    """Mostly applicable random walks with the odd random (often inapplicable) action."""
    below = below_from_facts(inst.blocks, inst.init)
    plan = []
    for _ in range(length):
        moves = list(domain.successors(below))
        if rng.random() < 0.1:
            name = ("pick-up", "put-down", "stack", "unstack")[int(rng.integers(4))]
            args = tuple(rng.choice(list(inst.blocks), size=domain.ACTION_ARITY[name]))
            plan.append(Action(name, tuple(str(a) for a in args)))
            continue
        (name, x, y), below = moves[int(rng.integers(len(moves)))]
        args = (inst.blocks[x],) if y < 0 else (inst.blocks[x], inst.blocks[y])
        plan.append(Action(name, args))
    return plan


def test_optimal_lengths_and_verdicts_agree_with_pyperplan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)  # pyperplan logs every search at INFO
    rng = np.random.default_rng(8)
    compared = 0
    for n in (3, 4, 5):
        for _ in range(8):
            inst = random_instance(n, rng)
            task = pyperplan_task(inst, tmp_path)
            reference = breadth_first_search(task)
            ours = domain.optimal_plan(inst).plan
            assert reference is not None and ours is not None
            assert len(ours) == len(reference)
            assert pyperplan_verdict(task, ours) == (True, None)
            reference_plan = [domain.parse_action(op.name) for op in reference]
            assert domain.simulate(inst, reference_plan).valid
            for length in (2, 4, 8):
                plan = random_plan(inst, rng, length)
                check = domain.simulate(inst, plan)
                assert pyperplan_verdict(task, plan) == (check.valid, check.step)
                compared += 1
    assert compared == 72
