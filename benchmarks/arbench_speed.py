"""ARBench speed: problems, scripted-expert episodes, responder answers and grading, per second.

What is measured
----------------
1. Problems: ``task.sample`` per instance (GN draws a secret of its split; SP/DC pick a bundled
   case) and ``task.load`` per row of the hand-written official-format fixtures.
2. Episodes: whole episodes through ``Runner.rollout`` (the default three-agent round-robin team,
   every agent the task's ``ScriptedExpert`` with ``error_rate=0``), ``--episodes`` of them in
   lockstep: episodes/s, mean turns, solve rate. GN's expert re-solves the consistency problem
   from the context at every turn (NumPy over the 5040 secrets).
3. Responders: answers/s of the scripted SP referee and DC suspects on the bundled cases
   (questions: the key questions plus off-topic ones), and of a ``PolicyResponder`` around a
   zero-cost ``ConstantPolicy`` (the wrapper's own overhead: prompt rendering, clean-up).
4. Grading: ``task.score`` per finished episode state (GN feedback replay, SP char+word F1 of the
   bottom story against itself, DC answer parsing), answers/s.

Every figure is the median of ``--repeats`` timings. The default run takes well under a minute on
one CPU core.

Usage::

    .venv/bin/python benchmarks/arbench_speed.py [--episodes 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from _bench import markdown_table, median_time

import teamtr_env
from adapters.scripted import ConstantPolicy, ScriptedExpert
from tasks import Episode
from tasks.arbench import (
    DetectiveCaseTask,
    GuessingNumbersTask,
    PolicyResponder,
    ScriptedResponder,
    SituationPuzzleTask,
)
from teamtr_env.runners import Runner

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "arbench"
IDS = {"GN": "teamtr/ARBench-GN-v0", "SP": "teamtr/ARBench-SP-v0", "DC": "teamtr/ARBench-DC-v0"}
Row = tuple[str, ...]
OFF_TOPIC = ["Was it raining?", "Is a cat involved?", "Did it happen at night?", "What happened?"]


def _sample_many(task: Any, rng: np.random.Generator, n: int) -> None:
    for _ in range(n):
        task.sample(rng)


def _score_many(task: Any, episode: Episode, n: int) -> None:
    for _ in range(n):
        task.score(episode)


def problems_section(repeats: int) -> list[Row]:
    rows: list[Row] = []
    tasks = {"GN": GuessingNumbersTask(), "SP": SituationPuzzleTask(), "DC": DetectiveCaseTask()}
    for game, task in tasks.items():
        rng = np.random.default_rng(0)
        n = 2000 if game == "GN" else 20000
        sample_s = median_time(partial(_sample_many, task, rng, n), repeats)
        path = FIXTURES / f"{game.lower()}.json"
        rows_in_file = len(task.load(path))
        load_s = median_time(partial(task.load, path), repeats)
        rows.append(
            (
                game,
                f"{1e6 * sample_s / n:.1f} µs",
                f"{1e6 * load_s / rows_in_file:.0f} µs/row ({rows_in_file} rows)",
            )
        )
    return rows


def episodes_section(episodes: int, repeats: int) -> list[Row]:
    rows: list[Row] = []
    for game, task_id in IDS.items():
        env_fn = partial(teamtr_env.make, task_id)
        runner = Runner(env_fn, ScriptedExpert(env_fn().task, seed=0), progress=False)
        problems = runner.sample_problems(episodes, seed=0, distinct=False)
        runner.rollout(problems, group_size=1, seed=0)  # warm-up: env pool, caches
        wall = median_time(partial(runner.rollout, problems, group_size=1, seed=1), repeats)
        batch = runner.rollout(problems, group_size=1, seed=1)
        turns = np.mean([e.turns for e in batch.episodes])
        solved = np.mean([e.correct for e in batch.episodes])
        rows.append(
            (
                game,
                f"{episodes / wall:.0f}",
                f"{1e3 * wall / (episodes * turns):.2f}",
                f"{turns:.2f}",
                f"{solved:.2f}",
            )
        )
    return rows


def responder_section(repeats: int) -> list[Row]:
    puzzles = [p.data for p in SituationPuzzleTask().load(FIXTURES / "sp.json")]
    cases = [p.data for p in DetectiveCaseTask().load(FIXTURES / "dc.json")]
    sp_calls = [(p, q) for p in puzzles for q in list(p["key_question"]) + OFF_TOPIC]
    dc_calls = [
        (c, s, q)
        for c in cases
        for s in c["suspects"]
        for q in ("Where were you at 10 PM?", "Did you see anyone?", "Did you use the weapon?")
    ]
    rows: list[Row] = []
    for name, responder in (
        ("scripted", ScriptedResponder()),
        ("PolicyResponder(ConstantPolicy)", PolicyResponder(ConstantPolicy("Yes"))),
    ):
        reps = 20

        def sp(r=responder, reps=reps) -> None:
            for _ in range(reps):
                for puzzle, question in sp_calls:
                    r.answer_puzzle(puzzle, question)

        def dc(r=responder, reps=reps) -> None:
            for _ in range(reps):
                for case, suspect, question in dc_calls:
                    r.answer_suspect(case, suspect, question, [])

        sp_rate = reps * len(sp_calls) / median_time(sp, repeats)
        dc_rate = reps * len(dc_calls) / median_time(dc, repeats)
        rows.append((name, f"{sp_rate:,.0f}", f"{dc_rate:,.0f}"))
    return rows


def grading_section(repeats: int) -> list[Row]:
    rows: list[Row] = []
    rng = np.random.default_rng(0)
    gn = GuessingNumbersTask()
    problem = gn.load(FIXTURES / "gn.json")[0]
    state = gn.start(problem, rng)
    for guess in ("0123", "4567", "8901", problem.answer):
        gn.respond(state, "a", f"Guess: {guess}")
    sp = SituationPuzzleTask()
    sp_problem = sp.load(FIXTURES / "sp.json")[0]
    sp_state = sp.start(sp_problem, rng)
    sp.respond(sp_state, "a", f"A: {sp_problem.answer}")
    dc = DetectiveCaseTask()
    dc_problem = dc.load(FIXTURES / "dc.json")[0]
    dc_state = dc.start(dc_problem, rng)
    dc.respond(dc_state, "a", "Reason: the key and the gloves.\nAnswer: C")
    for game, task, prob, st in (
        ("GN", gn, problem, state),
        ("SP", sp, sp_problem, sp_state),
        ("DC", dc, dc_problem, dc_state),
    ):
        episode = Episode(prob, (), None, st)
        n = 2000
        seconds = median_time(partial(_score_many, task, episode, n), repeats)
        rows.append((game, f"{n / seconds:,.0f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--episodes", type=int, default=64, help="episodes per rollout")
    parser.add_argument("--repeats", type=int, default=3, help="timings per figure (median)")
    args = parser.parse_args()
    print(
        markdown_table(
            "Problems",
            ("game", "sample / instance", "load official"),
            problems_section(args.repeats),
        )
    )
    print()
    print(
        markdown_table(
            f"Episodes (3-agent team, scripted expert, {args.episodes} in lockstep)",
            ("game", "episodes/s", "ms/turn", "turns/episode", "solved"),
            episodes_section(args.episodes, args.repeats),
        )
    )
    print()
    print(
        markdown_table(
            "Responders (answers/s)",
            ("responder", "SP referee", "DC suspect"),
            responder_section(args.repeats),
        )
    )
    print()
    print(
        markdown_table(
            "Grading (score() calls/s)", ("game", "answers/s"), grading_section(args.repeats)
        )
    )


if __name__ == "__main__":
    main()
