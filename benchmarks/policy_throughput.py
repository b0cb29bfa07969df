"""HFPolicy throughput on the tiny model: batched vs one-at-a-time generation, logprobs
forward+backward, and the runner's share of a real team rollout.

Usage::

    .venv/bin/python benchmarks/policy_throughput.py [--model DIR] [--new-tokens 32] [--json out.json]

1. Generation: tokens/s of ``HFPolicy.generate`` at batch 1, 16 and 64, each against generating the
   same number of messages one prompt per call (the issue's target: >= 8x at batch 64 on 2 cores).
2. ``logprobs`` forward + backward for 64 sequences of 100 completion tokens (after a short prompt).
3. Runner overhead with real models: a 3-agent team of tiny HFPolicy agents on teamtr/Arith-v0 with
   64 parallel episodes; the share of wall time spent outside ``generate`` (issue 2's target: < 5%).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

import teamtr_env
from adapters.hf import HFPolicy
from adapters.tiny import build_tiny_model
from teamtr_core.policy import SamplingParams
from teamtr_env.runners import Runner

PROMPT = "Compute: {a} + {b}\nReply with: Answer: <integer>\n### solver\n"


def timed(fn, repeats: int = 3) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description="HFPolicy throughput")
    parser.add_argument("--model", type=Path, help="model dir (default: build a tiny one)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    console = Console()
    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    policy = HFPolicy.from_pretrained(model_dir, micro_batch_size=64)
    console.print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    console.print(
        f"machine: {platform.platform()} | {os.cpu_count()} CPUs | torch {torch.__version__} "
        f"({torch.get_num_threads()} threads) | model {model_dir}"
    )
    prompts = [PROMPT.format(a=i, b=2 * i) for i in range(64)]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, seed=0)
    policy.generate(prompts[:4], sampling)  # warm-up
    rows = []
    gen_table = Table(title="1. generation (tokens/s, median of 3)")
    for col in ("batch", "batched tok/s", "one-at-a-time tok/s", "speed-up"):
        gen_table.add_column(col, justify="right")
    for batch in (1, 16, 64):
        batch_prompts = prompts[:batch]
        t_batch, gens = timed(lambda ps=batch_prompts: policy.generate(ps, sampling))
        tokens = sum(len(g.token_ids) for g in gens)
        t_single, singles = timed(
            lambda ps=batch_prompts: [policy.generate([p], sampling)[0] for p in ps]
        )
        single_tokens = sum(len(g.token_ids) for g in singles)
        batched, single = tokens / t_batch, single_tokens / t_single
        rows.append({"batch": batch, "batched_tok_s": batched, "single_tok_s": single})
        gen_table.add_row(
            str(batch), f"{batched:,.0f}", f"{single:,.0f}", f"{batched / single:.1f}x"
        )
    console.print(gen_table)

    completions = [[5 + (i * 7 + j) % 90 for j in range(100)] for i in range(64)]

    def fwd_bwd() -> None:
        policy.model.zero_grad()
        policy.logprobs(prompts, completions).message_logprobs().sum().backward()

    fwd_bwd()
    t_fb, _ = timed(fwd_bwd)
    console.print(f"\n2. logprobs forward+backward, 64 x 100 completion tokens: {t_fb:.3f} s")

    agents_dir = model_dir
    task_policies = {
        a: HFPolicy.from_pretrained(agents_dir) for a in ("solver", "critic", "aggregator")
    }
    runner = Runner(
        lambda: teamtr_env.make("teamtr/Arith-v0"),
        task_policies,
        SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens),
        progress=False,
    )
    problems = runner.sample_problems(64, seed=0)
    runner.rollout(problems[:4], seed=1)  # warm-up
    batch = runner.rollout(problems, group_size=1, seed=0)
    stats = batch.stats
    share = stats.overhead_s / stats.wall_s
    console.print(
        f"\n3. runner with 3 tiny HFPolicy agents, 64 episodes: wall {stats.wall_s:.2f} s, "
        f"generate {stats.policy_s:.2f} s, {stats.tokens_generated} tokens; outside the policies "
        f"{stats.overhead_s * 1e3:.1f} ms = {share:.2%} of wall (target < 5%)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"generation": rows, "fwd_bwd_s": t_fb, "runner_overhead_share": share}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
