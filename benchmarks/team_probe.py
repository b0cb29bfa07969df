"""Is a trained team's score a team effect? Probes a run's team on held-out problems.

Before reading a team's avg@K as coordination, check that every agent's message matters. For a
run directory written by ``teamtr train`` (its ``config.yaml`` and latest checkpoint) this plays
the team on distinct held-out problems and compares every message with the task's exact scripted
expert acting on the same context:

* **step accuracy** per agent: the message equals what the exact expert would write there;
* **all steps right**: every message of the episode equals the expert's;
* **P(team right | an earlier step wrong)**: how often the final answer is right although an
  earlier agent erred (a later agent repaired it, errors cancelled, or luck);
* **copy rate** per agent: the message repeats the previous message word for word;
* **best constant answer**: the score of always giving the held-out split's most common answer
  (the floor a team effect has to clear).

Usage::

    .venv/bin/python benchmarks/team_probe.py runs/teamtr-demo [--problems 400] [--k 4]
        [--checkpoint bc|latest] [--json OUT]

``--checkpoint bc`` probes the behaviour-cloned start instead (needs ``sft.cache_dir`` in the
run's config). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from adapters.scripted import ScriptedExpert
from teamtr_core.config import load_config
from teamtr_core.policy import SamplingParams
from teamtr_env.runners import Runner
from trainers.config import TrainConfig
from trainers.run.recipe import env_factory, load_checkpoint
from trainers.run.team_eval import agent_sampling, build_policies
from trainers.run.warm_start import behaviour_clone_cache


def probe(config: TrainConfig, policies: dict[str, Any], problems: int, k: int) -> dict[str, Any]:
    """The probe's numbers for ``policies`` on up to ``problems`` distinct held-out problems."""
    env_fn = env_factory(config, config.eval.split)
    sampling = agent_sampling(config, list(policies))
    runner = Runner(env_fn, policies, sampling, progress=False)
    chosen, _ = runner.sample_distinct(problems, seed=1)
    batch = runner.rollout(chosen, group_size=k, seed=2)
    task = runner.env.task
    expert = ScriptedExpert(task, 0.0)
    agents = runner.agents
    right: dict[tuple[int, str], bool] = {}
    copies: dict[str, list[bool]] = {a: [] for a in agents}
    previous: dict[int, str] = {}
    messages = sorted(batch.messages, key=lambda m: (m.episode, m.turn))
    contexts = [m.context for m in messages]
    of_message = [chosen[m.group] for m in messages]
    replies = expert.generate_privileged(contexts, of_message, SamplingParams(seed=0))
    for m, reply in zip(messages, replies):
        right[(m.episode, m.agent)] = reply.text == m.text
        if m.episode in previous:
            copies[m.agent].append(m.text == previous[m.episode])
        previous[m.episode] = m.text
    episodes = batch.episodes
    earlier_wrong = [
        e for e in episodes if not all(right.get((e.episode, a), True) for a in agents[:-1])
    ]
    answers = Counter(str(p.answer) for p in chosen)
    return {
        "problems_distinct": len(chosen),
        "k": k,
        "team_avg": float(batch.rewards().mean()),
        "step_accuracy": {
            a: float(np.mean([right[(e.episode, a)] for e in episodes if (e.episode, a) in right]))
            for a in agents
        },
        "all_steps_right": float(
            np.mean([all(right.get((e.episode, a), False) for a in agents) for e in episodes])
        ),
        "p_right_given_earlier_wrong": (
            float(np.mean([e.correct for e in earlier_wrong])) if earlier_wrong else None
        ),
        "episodes_with_an_earlier_error": len(earlier_wrong),
        "copy_rate": {a: float(np.mean(v)) for a, v in copies.items() if v},
        "best_constant_answer": max(answers.values()) / max(len(chosen), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--problems", type=int, default=400)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--checkpoint", choices=("latest", "bc"), default="latest")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    config = load_config(TrainConfig, args.run_dir / "config.yaml", [])
    env = env_factory(config, "train")()
    policies = build_policies(config, env, args.run_dir)
    if args.checkpoint == "bc":
        cache = behaviour_clone_cache(config)
        if cache is None or not cache.exists():
            print(f"no behaviour-cloning cache for {args.run_dir} (set sft.cache_dir)")
            return 2
        states = torch.load(cache, weights_only=True, map_location="cpu")["states"]
    else:
        checkpoint = load_checkpoint(args.run_dir)
        if checkpoint is None:
            print(f"no checkpoint in {args.run_dir}")
            return 2
        states = {a: s["policy"] for a, s in checkpoint["trainer"]["slots"].items()}
    for agent, state in states.items():
        policies[agent].load_state_dict(state)
    out = probe(config, policies, args.problems, args.k)
    print(
        f"{args.run_dir} ({args.checkpoint}): {out['problems_distinct']} distinct held-out problems x K={out['k']}"
    )
    print(f"  team avg@{out['k']}                      {out['team_avg']:.3f}")
    print(f"  best constant answer           {out['best_constant_answer']:.3f}")
    for agent, value in out["step_accuracy"].items():
        copy = out["copy_rate"].get(agent)
        extra = "" if copy is None else f", copies the previous message {copy:.3f}"
        print(f"  {agent:30s} step accuracy {value:.3f}{extra}")
    print(f"  all steps right                {out['all_steps_right']:.3f}")
    p = out["p_right_given_earlier_wrong"]
    print(
        f"  P(team right | earlier error)  {'-' if p is None else f'{p:.3f}'} "
        f"({out['episodes_with_an_earlier_error']} episodes)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
