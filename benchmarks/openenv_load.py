"""Load test of ``teamtr serve``: N concurrent OpenEnv sessions on loopback, each playing whole
episodes through OpenEnv's own client, against the same episodes played in process.

The server is ``teamtr serve TASK`` in its own process (every seat played by the caller). Each
session is a thread with its own ``GenericEnvClient``: it plays ``--episodes`` episodes, each
with a seed of its own, every move the task's scripted expert's for the observation it got
(wrong with probability ``--error-rate``, from a generator seeded by the episode). Recorded:
episodes and steps per second over the whole load, and the p50 / p99 latency of one step (a
client's ``step`` call, round trip). Then every episode is replayed in process, the same moves
on ``teamtr_env.make(TASK).reset(seed)``, and its reward and score must equal the served
episode's: nothing lost or mixed between sessions. The server must still answer ``/health``.

Usage::

    .venv/bin/python benchmarks/openenv_load.py [--quick] [--task textarena/Hanabi-v0]
        [-o num_players=2] [--sessions 8] [--episodes 4] [--error-rate 0.2] [--json OUT]

``--quick`` (what the slow test runs): 4 sessions of 2 episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import markdown_table, write_outputs
from _served import served

import teamtr_env
from teamtr_cli.common import parse_option


def serve(task: str, options: list[str], max_sessions: int) -> AbstractContextManager[str]:
    """``teamtr serve`` in its own process (``_served.served``); yields its URL."""
    args = [task, "--max-sessions", str(max_sessions)]
    for option in options:
        args += ["-o", option]
    return served(args)


def play_session(url: str, task: Any, seeds: list[int], error_rate: float) -> list[dict[str, Any]]:
    """One session's episodes: each one's seed, moves, step latencies, reward and score."""
    from tasks.openenv.importing import import_openenv_core

    GenericEnvClient = import_openenv_core().GenericEnvClient  # without Gradio's 6 s

    episodes = []
    with GenericEnvClient(base_url=url).sync() as client:
        for seed in seeds:
            rng = np.random.default_rng(seed)
            moves, latencies = [], []
            result = client.reset(seed=seed)
            while not result.done:
                text = result.observation["text"]
                move = task.expert_reply(text, rng, make_error=bool(rng.random() < error_rate))
                start = time.perf_counter()
                result = client.step({"text": move})
                latencies.append(time.perf_counter() - start)
                moves.append(move)
            score = result.observation["metadata"]["score"]
            episodes.append({"seed": seed, "moves": moves, "latencies": latencies, "score": score})
    return episodes


def replay(task_id: str, options: dict[str, Any], episode: dict[str, Any]) -> dict[str, Any]:
    """The score of the same episode played in process with the same moves."""
    env = teamtr_env.make(task_id, **options)
    env.reset(seed=episode["seed"])
    for move in episode["moves"]:
        env.step(move)
    assert env.score is not None, "the moves did not end the episode in process"
    return json.loads(json.dumps(env.score.to_dict()))


def run(task_id: str, raw_options: list[str], sessions: int, per_session: int, error_rate: float):
    options = dict(parse_option(o) for o in raw_options)
    task = teamtr_env.make(task_id, **options).task
    seeds = [[1000 * s + e for e in range(per_session)] for s in range(sessions)]
    with serve(task_id, raw_options, max_sessions=sessions) as url:
        start = time.perf_counter()
        with ThreadPoolExecutor(sessions) as pool:
            played = list(pool.map(lambda chunk: play_session(url, task, chunk, error_rate), seeds))
        wall = time.perf_counter() - start
        healthy = httpx.get(f"{url}/health", timeout=10).json().get("status") == "healthy"
    episodes = [e for chunk in played for e in chunk]
    mismatches = [e["seed"] for e in episodes if replay(task_id, options, e) != e["score"]]
    latencies = np.array([x for e in episodes for x in e["latencies"]])
    steps = int(latencies.size)
    return {
        "task": task_id,
        "options": options,
        "sessions": sessions,
        "episodes_per_session": per_session,
        "episodes": len(episodes),
        "steps": steps,
        "error_rate": error_rate,
        "wall_s": wall,
        "episodes_per_s": len(episodes) / wall,
        "steps_per_s": steps / wall,
        "step_latency_ms": {
            "p50": float(np.percentile(latencies, 50) * 1e3),
            "p99": float(np.percentile(latencies, 99) * 1e3),
            "max": float(latencies.max() * 1e3),
        },
        "mean_reward": float(np.mean([e["score"]["reward"] for e in episodes])),
        "mismatched_episodes": mismatches,
        "server_healthy_after": healthy,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--task", default="textarena/Hanabi-v0")
    parser.add_argument("-o", dest="options", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=4, help="episodes per session")
    parser.add_argument("--error-rate", type=float, default=0.2)
    parser.add_argument("--quick", action="store_true", help="4 sessions of 2 episodes")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    options = args.options if args.options is not None else ["num_players=2"]
    if args.quick:
        args.sessions, args.episodes = 4, 2
    result = run(args.task, options, args.sessions, args.episodes, args.error_rate)
    lat = result["step_latency_ms"]
    print(
        markdown_table(
            f"teamtr serve {result['task']} {' '.join('-o ' + o for o in options)}: "
            f"{result['sessions']} concurrent sessions on loopback",
            [
                "episodes",
                "steps",
                "episodes/s",
                "steps/s",
                "step p50 ms",
                "step p99 ms",
                "mismatched",
                "healthy after",
            ],
            [
                [
                    result["episodes"],
                    result["steps"],
                    f"{result['episodes_per_s']:.2f}",
                    f"{result['steps_per_s']:.0f}",
                    f"{lat['p50']:.1f}",
                    f"{lat['p99']:.1f}",
                    len(result["mismatched_episodes"]),
                    result["server_healthy_after"],
                ]
            ],
        )
    )
    write_outputs(args.json, result)
    ok = not result["mismatched_episodes"] and result["server_healthy_after"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
