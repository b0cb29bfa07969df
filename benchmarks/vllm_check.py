"""GPU check of the vLLM backend against HFPolicy (run on a CUDA machine with the vllm extra).

What it checks, on a model directory (default: a freshly built tiny model):
1. distribution: the first-token distribution of vLLM samples at temperature 1 matches HFPolicy's
   softmax (total variation), and HFPolicy.logprobs of vLLM's sampled messages are finite;
2. weight sync: after perturbing the trainer's weights and calling sync_weights, vLLM samples follow
   the NEW distribution (TV to the new softmax small, to the old one larger);
3. speed: tokens/s of VLLMPolicy.generate vs HFPolicy.generate on the same prompts.

Usage::

    pip install -e ".[models,vllm]"
    python benchmarks/vllm_check.py [--model DIR] [--prompts 256] [--new-tokens 64]

Prints a table and exits 1 if a check fails, 0 if all pass, 2 when no GPU/vLLM is present.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def first_token_tv(policy, trainer, prompt: str, n: int, seed: int) -> float:
    import torch

    from teamtr_core.policy import SamplingParams

    gens = policy.generate(
        [prompt] * n, SamplingParams(temperature=1.0, max_new_tokens=1, seed=seed)
    )
    first = torch.tensor([g.token_ids[0] for g in gens])
    freq = torch.bincount(first, minlength=trainer.model.config.vocab_size).float() / n
    with torch.no_grad():
        ids = torch.tensor([trainer.prompt_ids(prompt)], device=trainer.device)
        expected = torch.softmax(trainer.model(input_ids=ids).logits[0, -1].float(), -1).cpu()
    return float(0.5 * (freq - expected[: freq.numel()]).abs().sum())


def teamtr_stage_with_vllm_rollouts(model_dir: Path) -> dict[str, float]:
    """One TeamTR stage of the demo's team, trainers on cuda, every agent's rollouts from a vLLM
    engine synced after each accepted update: wall time, syncs and the largest engine-trainer
    log-prob gap of its updates (a broken sync shows as a gap of an update's size)."""
    import functools
    import math

    import teamtr_env
    from adapters.hf import HFPolicy
    from adapters.rollout_engine import EngineRollouts
    from adapters.vllm_policy import VLLMPolicy
    from teamtr_core.config import from_dict
    from trainers.config import DEMO_TASK, DEMO_TASK_OPTIONS, TrainConfig
    from trainers.learners.team_trainer import TeamTrainer

    env_fn = functools.partial(teamtr_env.make, DEMO_TASK, **DEMO_TASK_OPTIONS)
    policies = {}
    for agent in env_fn().possible_agents:
        trainer = HFPolicy.from_pretrained(model_dir, device="cuda")
        engine = functools.partial(
            VLLMPolicy,
            model_dir,
            max_prompt_tokens=trainer.max_prompt_tokens,
            dtype="float32",
            gpu_memory_utilization=0.1,
        )
        policies[agent] = EngineRollouts(trainer, engine)
    config = from_dict(
        TrainConfig,
        {"sft": None, "diagnostics": "off", "schedule": {"stages": 1, "problems_per_batch": 8}},
    )
    team = TeamTrainer(config, env_fn, policies)
    t0 = time.perf_counter()
    report = team.run_stage()
    gaps = [u.logprob_gap for u in report.updates if math.isfinite(u.logprob_gap)]
    return {
        "wall_s": time.perf_counter() - t0,
        "syncs": report.metrics.get("rollout/sync_count", 0.0),
        "max_gap": max(gaps) if gaps else math.nan,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="model directory (default: build a tiny one)")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=4000, help="samples for the TV checks")
    args = parser.parse_args()
    console = Console()

    import torch

    from adapters.vllm_policy import vllm_available

    if not vllm_available() or not torch.cuda.is_available():
        console.print(
            "vLLM or a CUDA GPU is missing: nothing to check (exit 2). On a CPU, `make test-vllm` "
            "tests the CPU engine and benchmarks/rollout_engines.py measures it."
        )
        return 2

    from adapters.hf import HFPolicy
    from adapters.tiny import build_tiny_model
    from adapters.vllm_policy import VLLMPolicy
    from teamtr_core.policy import SamplingParams

    model_dir = args.model or build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    trainer = HFPolicy.from_pretrained(model_dir, device="cuda")
    engine = VLLMPolicy(model_dir, max_prompt_tokens=trainer.max_prompt_tokens, dtype="float32")
    prompt = "Compute: 12 + 30\nReply with: Answer: <integer>\n### solver\n"
    rows, failures = [], []

    tv = first_token_tv(engine, trainer, prompt, args.samples, seed=0)
    noise_floor = 3.0 * (trainer.model.config.vocab_size / args.samples) ** 0.5 / 2
    rows.append(("first-token TV, vLLM vs HF", f"{tv:.4f}", f"< {noise_floor:.4f}"))
    if tv >= noise_floor:
        failures.append("distribution")
    gens = engine.generate(
        [prompt] * 64, SamplingParams(temperature=1.0, max_new_tokens=32, seed=1)
    )
    finite = bool(
        torch.isfinite(
            trainer.logprobs([prompt] * 64, [g.token_ids for g in gens]).message_logprobs()
        ).all()
    )
    rows.append(("HF logprobs of vLLM samples finite", str(finite), "True"))
    if not finite:
        failures.append("logprobs")

    old = HFPolicy.from_pretrained(model_dir, device="cuda")
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    sent = engine.sync_weights(trainer)
    tv_new = first_token_tv(engine, trainer, prompt, args.samples, seed=2)
    tv_old = first_token_tv(engine, old, prompt, args.samples, seed=2)
    rows.append(
        (
            f"after sync ({sent} tensors): TV to new / old",
            f"{tv_new:.4f} / {tv_old:.4f}",
            "new < floor, new < old",
        )
    )
    if not (tv_new < noise_floor and tv_new < tv_old):
        failures.append("sync")

    prompts = [f"Compute: {i} + {i + 1}\n### solver\n" for i in range(args.prompts)]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, seed=3)
    for name, policy in (("vLLM", engine), ("HF", trainer)):
        policy.generate(prompts[:8], sampling)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = policy.generate(prompts, sampling)
        torch.cuda.synchronize()
        tokens = sum(len(g.token_ids) for g in out)
        rows.append(
            (
                f"{name} tokens/s ({args.prompts} prompts)",
                f"{tokens / (time.perf_counter() - t0):,.0f}",
                "",
            )
        )

    stage = teamtr_stage_with_vllm_rollouts(model_dir)
    rows.append(
        (
            "one TeamTR stage, vLLM rollouts: wall s / syncs / max log-prob gap",
            f"{stage['wall_s']:.1f} / {stage['syncs']:.0f} / {stage['max_gap']:.2e}",
            "gap < 1e-2 (bf16/fp32 kernels differ)",
        )
    )
    if not stage["max_gap"] < 1e-2:
        failures.append("stage")

    table = Table(title=f"vLLM backend check: {model_dir}")
    for col in ("check", "measured", "expected"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(f"[red]FAILED: {failures}[/]" if failures else "[green]all checks passed[/]")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
