"""Blocksworld task speed: instance generation with optimal planning per size, the expert, grading.

What is measured
----------------
* Generation: for every size n in 3..8 ``--instances`` instances (and ``--large`` for 10 and 12
  blocks, sizes met only in loaded PlanBench files) drawn as the task draws them (two uniform
  states by exact counting, goal = the second state's ``on`` facts, trivial goals redrawn), each
  solved optimally by ``optimal_plan`` (A* with the admissible must-move bound) under the loader's
  cap of 500,000 expansions. Columns: mean ms to draw the states, mean and max ms of the optimal
  search, mean and max states expanded, mean optimal plan length, searches stopped by the cap;
  ``sample ms`` is ``BlocksworldTask(blocks=n, split="test").sample(rng)`` end to end (states,
  split draw, search, problem row) and ``expert ms`` the scripted expert on the rendered prompt
  (read the statement back, plan, write the plan).
* Validation: ``BlocksworldTask.grade`` on ``--answers`` replies per kind, one thread, plans/s:
  the optimal plan of a 4- and an 8-block instance, an invalid plan (two steps swapped), chatter
  with no plan, a 2,000-char reply of random plan words (the team's default message limit), and a
  1 MB reply (read up to the extraction cap of 200,000 characters).

Usage::

    .venv/bin/python benchmarks/blocksworld_speed.py [--instances 50] [--answers 2000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
from _bench import grading_rates

from tasks import Problem
from tasks.blocksworld import BlocksworldTask, text
from tasks.blocksworld.domain import Instance, facts_from_below, optimal_plan, parse_action
from tasks.blocksworld.problems import LOAD_MAX_EXPANSIONS
from tasks.blocksworld.states import sample_state

SIZES = [3, 4, 5, 6, 7, 8, 10, 12]
GENERATED = range(3, 9)  # sizes the task's generator accepts
NAMES = "abcdefghijkl"


def draw(n: int, rng: np.random.Generator) -> Instance:
    """A non-trivial instance of ``n`` blocks, as the task draws it (without the split draw)."""
    names = tuple(NAMES[:n])
    while True:
        init = facts_from_below(names, sample_state(n, rng))
        target = facts_from_below(names, sample_state(n, rng))
        goal = frozenset(f for f in target if f[0] == "on")
        if not goal <= init:
            return Instance(names, init, goal)


def generation_row(n: int, instances: int) -> tuple[float, ...]:
    """(draw ms, search mean ms, search max ms, expanded mean, expanded max, length, capped,
    sample ms, expert ms) for ``n`` blocks."""
    rng = np.random.default_rng(n)
    draws, searches, expanded, lengths = [], [], [], []
    capped = 0
    for _ in range(instances):
        start = time.perf_counter()
        inst = draw(n, rng)
        draws.append(time.perf_counter() - start)
        start = time.perf_counter()
        result = optimal_plan(inst, max_expansions=LOAD_MAX_EXPANSIONS)
        searches.append(time.perf_counter() - start)
        expanded.append(result.expanded)
        if result.plan is None:
            if not result.exhausted:
                raise SystemExit(f"a {n}-block instance has no plan")
            capped += 1
            continue
        lengths.append(len(result.plan))
    sample_ms = expert_ms = float("nan")
    if n in GENERATED:
        task = BlocksworldTask(blocks=n, split="test")
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        problems = [task.sample(rng) for _ in range(instances)]
        sample_ms = (time.perf_counter() - start) / instances * 1e3
        contexts = [f"### Problem\n{task.prompt(p)}\n### agent_0\n" for p in problems]
        start = time.perf_counter()
        replies = [
            task.expert_reply(c, rng, make_error=False, problem=p)
            for c, p in zip(contexts, problems)
        ]
        expert_ms = (time.perf_counter() - start) / instances * 1e3
        if not all(task.grade(p, r).correct for p, r in zip(problems, replies)):
            raise SystemExit(f"the expert failed on a {n}-block instance")
    return (
        statistics.mean(draws) * 1e3,
        statistics.mean(searches) * 1e3,
        max(searches) * 1e3,
        statistics.mean(expanded),
        max(expanded),
        statistics.mean(lengths),
        capped,
        sample_ms,
        expert_ms,
    )


def grading_rows(answers: int) -> list[tuple[str, float, str]]:
    """(reply kind, plans/s, reasons seen)."""
    rng = np.random.default_rng(0)
    small = BlocksworldTask(blocks=4).sample(rng)
    large = BlocksworldTask(blocks=8).sample(rng)

    def plan_text(problem: Problem, swap: bool = False) -> str:
        plan = [parse_action(a) for a in problem.answer["optimal_plan"]]
        if swap:
            plan[0], plan[1] = plan[1], plan[0]
        return text.render_plan(plan)

    words = ["pick", "up", "stack", "unstack", "the", "red", "blue", "block", "on", "top", "\n"]
    noise = " ".join(rng.choice(words, size=600))[:2000]
    cases = [
        ("optimal plan, 4 blocks", small, plan_text(small), answers),
        ("optimal plan, 8 blocks", large, plan_text(large), answers),
        ("invalid plan, 8 blocks", large, plan_text(large, swap=True), answers),
        ("chatter, no plan", large, "I would move the blocks around carefully. " * 10, answers),
        ("2,000 chars of plan words", large, noise, answers),
        ("1 MB reply", large, "pick up the red block " * 50_000, 20),
    ]
    grader = BlocksworldTask()
    return grading_rates(grader, cases)


def main() -> None:
    """Prints the generation and validation tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--instances", type=int, default=50, help="instances per size")
    parser.add_argument(
        "--large", type=int, default=10, help="instances for 10 and 12 blocks (loaded files only)"
    )
    parser.add_argument("--answers", type=int, default=2000, help="replies per grading kind")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {platform.system()}")
    start = time.perf_counter()
    print(f"\nGeneration with optimal planning ({args.instances} instances per size)")
    header = (
        f"{'blocks':<7}{'draw ms':>8}{'A* ms':>8}{'A* max':>8}{'expanded':>10}{'max exp':>9}"
        f"{'opt len':>8}{'capped':>7}{'sample ms':>11}{'expert ms':>11}"
    )
    print(header)
    for n in SIZES:
        count = args.instances if n in GENERATED else min(args.instances, args.large)
        d, s, smax, e, emax, length, capped, sample, expert = generation_row(n, count)
        print(
            f"{n:<7}{d:>8.2f}{s:>8.2f}{smax:>8.1f}{e:>10.0f}{emax:>9.0f}{length:>8.1f}"
            f"{capped:>7.0f}{sample:>11.2f}{expert:>11.2f}"
        )
    print(f"\nValidation, one thread ({args.answers} replies per kind)")
    print(f"{'reply':<28}{'plans/s':>10}  reasons")
    for name, rate, reasons in grading_rows(args.answers):
        print(f"{name:<28}{rate:>10.0f}  {reasons}")
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
