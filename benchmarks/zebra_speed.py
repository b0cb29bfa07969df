"""ZebraLogic task speed: puzzle generation per size, the expert's solve-from-text, grading.

What is measured
----------------
* Generation: for every size N x M (N, M in 2..6), ``generate_puzzle(rng, N, M)`` (Algorithm 1:
  random solution, every true clue, SAT-checked reduction, shuffle) ``--instances`` times with one
  seeded generator; mean and max ms per instance, and the mean number of clues kept. The
  ``sample ms`` column is ``ZebraTask(houses=N, attributes=M, split="test").sample(rng)``: the same
  plus rendering and the split draw (solutions are drawn until one hashes into the test split,
  which costs only cheap solution draws, not extra clue reductions).
* Expert: ``solve_text(prompt)`` on each generated prompt (parse the text back, SAT-solve, prove
  uniqueness with a blocking clause); mean ms.
* Grading: ``ZebraTask.grade`` on ``--answers`` answers per kind, one thread, answers/s: a correct
  JSON answer (3x3 and 6x6), a wrong one (two values swapped), prose without JSON, a 2,000-char
  message of random braces (the team's default message limit), and a 1 MB answer.

Usage::

    .venv/bin/python benchmarks/zebra_speed.py [--instances 10] [--answers 2000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
from _bench import grading_rates

from tasks.zebra import ZebraTask, generate_puzzle
from tasks.zebra.expert import answer_json, solve_text, swap_two_values

SIZES = [(n, m) for n in range(2, 7) for m in range(2, 7)]


def generation_rows(instances: int) -> list[tuple[str, float, float, float, float, float]]:
    """(size, mean ms, max ms, mean clues, sample ms, expert ms) per size."""
    rows = []
    for n, m in SIZES:
        rng = np.random.default_rng(n * 10 + m)
        times, clues = [], []
        for _ in range(instances):
            start = time.perf_counter()
            puzzle, _ = generate_puzzle(rng, n, m)
            times.append(time.perf_counter() - start)
            clues.append(len(puzzle.clues))
        task = ZebraTask(houses=n, attributes=m, split="test")
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        problems = [task.sample(rng) for _ in range(instances)]
        sample_ms = (time.perf_counter() - start) / instances * 1e3
        prompts = [task.prompt(p) for p in problems]
        start = time.perf_counter()
        solved = [solve_text(text) for text in prompts]
        expert_ms = (time.perf_counter() - start) / instances * 1e3
        if any(s != p.answer for s, p in zip(solved, problems)):
            raise SystemExit(f"expert failed on a {n}x{m} puzzle")
        rows.append(
            (
                f"{n}x{m}",
                statistics.mean(times) * 1e3,
                max(times) * 1e3,
                statistics.mean(clues),
                sample_ms,
                expert_ms,
            )
        )
    return rows


def grading_rows(answers: int) -> list[tuple[str, float, str]]:
    """(reply kind, answers/s, reasons seen)."""
    rng = np.random.default_rng(0)
    small = ZebraTask(houses=3, attributes=3).sample(rng)
    large = ZebraTask(houses=6, attributes=6).sample(rng)
    braces = "".join(rng.choice(list('{}":, abc'), size=2000))
    cases = [
        ("correct 3x3", small, answer_json(small.answer, "ok"), answers),
        ("correct 6x6", large, answer_json(large.answer, "ok"), answers),
        ("wrong 6x6", large, answer_json(swap_two_values(large.answer, rng), "ok"), answers),
        ("prose, no JSON", large, "I think Arnold lives in the first house. " * 10, answers),
        ("2,000 random brace chars", large, braces, answers),
        ("1 MB answer", large, "x" * 1_000_000 + answer_json(large.answer, "ok"), 20),
    ]
    grader = ZebraTask()
    return grading_rates(grader, cases)


def main() -> None:
    """Prints the generation and grading tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--instances", type=int, default=10, help="puzzles per size")
    parser.add_argument("--answers", type=int, default=2000, help="answers per grading kind")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {platform.system()}")
    start = time.perf_counter()
    print(f"\nGeneration ({args.instances} puzzles per size)")
    print(f"{'size':<6}{'gen ms':>9}{'max ms':>9}{'clues':>8}{'sample ms':>11}{'expert ms':>11}")
    for size, mean, worst, clues, sample_ms, expert_ms in generation_rows(args.instances):
        print(
            f"{size:<6}{mean:>9.1f}{worst:>9.1f}{clues:>8.1f}{sample_ms:>11.1f}{expert_ms:>11.1f}"
        )
    print(f"\nGrading, one thread ({args.answers} answers per kind)")
    print(f"{'reply':<26}{'answers/s':>12}  reasons")
    for name, rate, reasons in grading_rows(args.answers):
        print(f"{name:<26}{rate:>12.0f}  {reasons}")
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
