"""reasoning-gym task speed: problems generated and graded per second, for every dataset.

What is measured
----------------
For every reasoning-gym id that builds with default options (``reasoning_gym/<name>-v0``):

* ``build s``: making the task (reasoning-gym's config check and dataset constructor; acre builds
  its items up front). Built once per process and options.
* ``train/s`` and ``test/s``: ``task.sample(rng)`` of the train and test splits, problems per
  second. A split keeps only the items whose question text hashes into it, so the test split
  draws about ten items per problem and the train split 1.25.
* ``graded/s``: ``task.grade`` of the expert's right answer (the item's reference answer) in one
  thread, answers per second: extraction, the JSON request to the scoring worker process, the
  dataset's ``score_answer`` there. A worker rebuilds each item once (cached). Datasets without a
  reference answer are graded on ``Answer: 0`` (the score is then 0).
* ``right``: the share of those answers that scored ``correct`` (1.0 where there is a reference
  answer: the expert's answers parse back).

Usage::

    .venv/bin/python benchmarks/reasoning_gym_speed.py [--problems 20] [--only basic_arithmetic,gcd]
        [--json benchmarks/results/reasoning_gym_speed.json]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, write_outputs

import teamtr_env
from tasks.reasoning_gym import CATALOGUE
from tasks.reasoning_gym.catalogue import NO_DEFAULT_BUILD


def measure(name: str, problems: int) -> dict[str, Any]:
    """One dataset's row."""
    start = time.perf_counter()
    task = teamtr_env.make(f"reasoning_gym/{name}", split="train").task
    build_s = time.perf_counter() - start
    rates = {}
    drawn = {}
    for split in ("train", "test"):
        split_task = (
            task if split == "train" else teamtr_env.make(f"reasoning_gym/{name}", split=split).task
        )
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        drawn[split] = [split_task.sample(rng) for _ in range(problems)]
        rates[split] = problems / (time.perf_counter() - start)
    replies = [
        f"<answer>\n{p.answer}\n</answer>" if p.answer is not None else "Answer: 0"
        for p in drawn["train"]
    ]
    task.grade(drawn["train"][0], replies[0])  # the worker is up before timing
    start = time.perf_counter()
    scores = [task.grade(p, r) for p, r in zip(drawn["train"], replies)]
    graded = problems / (time.perf_counter() - start)
    return {
        "dataset": name,
        "category": CATALOGUE[name][0],
        "build_s": build_s,
        "train_per_s": rates["train"],
        "test_per_s": rates["test"],
        "graded_per_s": graded,
        "right": sum(s.correct for s in scores) / len(scores),
        "reference_answer": CATALOGUE[name][2],
    }


def main() -> None:
    """Prints the table and writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--problems", type=int, default=20, help="problems per split and dataset")
    parser.add_argument("--only", default="", help="comma-separated dataset names (default: all)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the rows")
    args = parser.parse_args()
    names = [n for n in CATALOGUE if n not in NO_DEFAULT_BUILD]
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(CATALOGUE))
        if unknown:
            raise SystemExit(f"unknown datasets: {unknown}")
        names = [n for n in names if n in wanted]
    print(f"python {platform.python_version()}, {platform.machine()}, {platform.system()}")
    start = time.perf_counter()
    rows = []
    for name in names:
        rows.append(measure(name, args.problems))
        r = rows[-1]
        print(
            f"{name:<28}{r['build_s']:>8.2f}{r['train_per_s']:>10.0f}{r['test_per_s']:>10.0f}"
            f"{r['graded_per_s']:>10.0f}{r['right']:>7.2f}",
            flush=True,
        )
    table = [
        (
            r["dataset"],
            r["category"],
            f"{r['build_s']:.2f}",
            f"{r['train_per_s']:.0f}",
            f"{r['test_per_s']:.0f}",
            f"{r['graded_per_s']:.0f}",
            f"{r['right']:.2f}" if r["reference_answer"] else "n/a",
        )
        for r in rows
    ]
    header = ("dataset", "category", "build s", "train/s", "test/s", "graded/s", "right")
    print()
    print(
        markdown_table(f"reasoning-gym speed ({args.problems} problems per split)", header, table)
    )
    seconds = time.perf_counter() - start
    print(f"\n{len(rows)} datasets in {seconds:.0f} s")
    write_outputs(
        args.json,
        {"problems": args.problems, "python": platform.python_version(), "rows": rows},
    )


if __name__ == "__main__":
    main()
