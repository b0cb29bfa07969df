"""Math task speed: problem generation per kind and grading throughput through math-verify.

What is measured
----------------
* Generation: for every generator kind and difficulty, ``MathTask(kinds=kind,
  difficulty=d).sample(rng)`` called ``--samples`` times; µs per instance (median of
  ``--repeats`` runs).
* Grading: ``MathTask().grade(problem, text)`` on generated difficulty-2 problems, one thread, the
  default verifier pool (one persistent math-verify worker process, warmed up first), answers/s
  for four kinds of reply:

  - ``correct, same form``: ``\\boxed{<gold>}``;
  - ``correct, other form``: the gold rewritten (``\\dfrac``, a tuple without spaces, a set in
    reverse order, an integer as ``\\frac{2n}{2}``);
  - ``wrong``: the gold with one number moved (the scripted expert's error);
  - ``garbage in a box``: ``\\boxed{@#?abc}`` (math-verify falls back to comparing strings);
  - ``no box``: plain prose (no answer is extracted; math-verify is never called).

  Each repeat uses ``--answers`` problems not graded before, so neither the verifier's
  ``(gold, answer)`` cache nor math-verify's internal caches inflate the numbers; a last row
  re-grades already-seen pairs (the cache hit path, no worker round trip).
* Timeout: wall time of grading ``\\boxed{9^{9^{9^{9}}}}`` with ``timeout_s=1``, and of the next
  (fresh-worker) grade.

Usage::

    .venv/bin/python benchmarks/math_speed.py [--samples 1000] [--answers 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
from _bench import median_time

from tasks.base import Problem
from tasks.math import MathTask
from tasks.math.expert import wrong_candidates
from tasks.math.generate import DIFFICULTIES, GENERATORS


def generation_table(samples: int, repeats: int) -> list[tuple[str, int, float]]:
    """(kind, difficulty, µs per instance) for every kind and difficulty."""
    rows = []
    for kind in GENERATORS:
        for difficulty in DIFFICULTIES:
            task = MathTask(kinds=kind, difficulty=difficulty)

            def run(task: MathTask = task) -> None:
                rng = np.random.default_rng(0)
                for _ in range(samples):
                    task.sample(rng)

            rows.append((kind, difficulty, median_time(run, repeats) / samples * 1e6))
    return rows


def _other_form(gold: str) -> str:
    """An equivalent answer written differently: ``\\dfrac``, no spaces in a tuple, a set in
    reverse order, an integer as an unreduced fraction."""
    if "\\frac" in gold:
        return gold.replace("\\frac", "\\dfrac")
    if gold.startswith("("):
        return gold.replace(" ", "")
    if ", " in gold:
        return ", ".join(reversed(gold.split(", ")))
    return f"\\frac{{{2 * int(gold)}}}{{2}}"


def _word(i: int) -> str:
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[r]
        if not i:
            return letters


def grading_table(answers: int, repeats: int) -> list[tuple[str, float, str]]:
    """(reply kind, answers/s, reasons seen): each repeat grades ``answers`` problems never seen
    before, so neither the verifier's pair cache nor math-verify's own caches are hit."""
    task = MathTask(difficulty=2)
    rng = np.random.default_rng(0)
    problems: list[Problem] = []
    seen: set[str] = set()
    while len(problems) < answers * repeats:
        problem = task.sample(rng)
        if problem.id not in seen:
            seen.add(problem.id)
            problems.append(problem)
    task.grade(Problem("warm", {}, "1"), "\\boxed{1}")  # start the worker outside the timings
    err_rng = np.random.default_rng(1)  # the expert's perturbation, unchecked: no grading here
    replies: dict[str, Callable[[int, Problem], str]] = {
        "correct, same form": lambda i, p: f"\\boxed{{{p.answer}}}",
        "correct, other form": lambda i, p: f"\\boxed{{{_other_form(p.answer)}}}",
        "wrong": lambda i, p: f"\\boxed{{{wrong_candidates(p.answer, err_rng)[0]}}}",
        "garbage in a box": lambda i, p: f"\\boxed{{@#?{_word(i)}}}",
        "no box": lambda i, p: f"I think it is about {i}.",
    }
    rows = []
    for name, make in replies.items():
        texts = [make(i, p) for i, p in enumerate(problems)]  # built outside the timings
        reasons: set[str] = set()
        times = []
        for r in range(repeats):
            part = slice(r * answers, (r + 1) * answers)
            start = time.perf_counter()
            for problem, text in zip(problems[part], texts[part]):
                reasons.add(str(task.grade(problem, text).details["reason"]))
            times.append(time.perf_counter() - start)
        rows.append((name, answers / statistics.median(times), ",".join(sorted(reasons))))
    part = slice(0, answers)
    texts = [f"\\boxed{{{p.answer}}}" for p in problems[part]]
    start = time.perf_counter()
    for problem, text in zip(problems[part], texts):
        task.grade(problem, text)
    rows.append(("correct, cached pair", answers / (time.perf_counter() - start), "correct"))
    return rows


def timeout_row() -> tuple[float, float, str]:
    """(seconds for the tower with timeout_s=1, seconds for the next grade, reason)."""
    task = MathTask(timeout_s=1.0)
    problem = Problem("t", {"problem": "?"}, "9")
    start = time.perf_counter()
    score = task.grade(problem, "\\boxed{9^{9^{9^{9}}}}")
    tower = time.perf_counter() - start
    start = time.perf_counter()
    task.grade(problem, "\\boxed{3^2}")
    return tower, time.perf_counter() - start, str(score.details["reason"])


def main() -> None:
    """Prints the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", type=int, default=1000, help="instances per generator run")
    parser.add_argument("--answers", type=int, default=100, help="distinct answers per reply kind")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {platform.system()}")

    print("\nGeneration (µs per instance)")
    print(f"{'kind':<12}" + "".join(f"{'d' + str(d):>10}" for d in DIFFICULTIES))
    gen = generation_table(args.samples, args.repeats)
    for kind in GENERATORS:
        cells = [us for k, _, us in gen if k == kind]
        print(f"{kind:<12}" + "".join(f"{us:>10.1f}" for us in cells))

    print(f"\nGrading, one thread ({args.answers} distinct answers per kind)")
    print(f"{'reply':<22}{'answers/s':>12}  reasons")
    for name, rate, reasons in grading_table(args.answers, args.repeats):
        print(f"{name:<22}{rate:>12.0f}  {reasons}")

    tower, after, reason = timeout_row()
    print(
        f"\nTimeout: 9^{{9^{{9^{{9}}}}}} with timeout_s=1 -> {reason} in {tower:.2f} s; "
        f"next grade (fresh worker) {after:.2f} s"
    )


if __name__ == "__main__":
    main()
