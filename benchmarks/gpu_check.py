"""GPU check: the transformers policies and one TeamTR stage on CUDA, as one prepared script.

Checks, on a tiny model built locally (nothing is downloaded):

* **correctness**: ``HFPolicy.logprobs`` on the device in float32 equals CPU float32 (to 1e-4), and
  in bfloat16 stays within ``BF16_TOL`` nats per token; seeded sampling on the device gives the
  same messages run to run; a checkpoint saved on the device scores the same on the CPU, and one
  saved on the CPU scores the same on the device;

then, on a randomly initialised Llama of about 100M parameters (the character tokenizer,
``build_tiny_model`` with a bigger config) in bfloat16:

* **throughput**: ``generate`` tokens/s at batch 1, 64 and 256, ``logprobs`` forward + backward
  tokens/s, and peak GPU memory;
* **one training stage**: one TeamTR stage of a 3-agent team of those models on
  ``teamtr/Arith-v0``, with its time split into rollouts, gradient steps and KL monitoring, and peak
  GPU memory;
* **team layouts** (benchmarks/team_memory.py's GPU rows): peak GPU memory of three LoRA agents
  as separate copies and on one shared base.

Usage::

    python benchmarks/gpu_check.py [--json gpu_check.json] [--out-dir runs/gpu_check]
    python benchmarks/gpu_check.py --device cpu --tiny      # the same logic on CPU (CI runs it)

Without CUDA (and without ``--device cpu``) it exits 2 at once. It prints a table and writes JSON
beside it. ``--tiny`` swaps the 100M model for the tiny one and shrinks batches, for a CPU run in
seconds. Exit status 1 when a correctness check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from adapters.hf import DType, HFPolicy
from adapters.tiny import TinyModelSpec, build_tiny_model
from teamtr_core.policy import SamplingParams

BF16_TOL = 0.25  # nats per token: bfloat16 keeps ~3 significant digits of the logits
FP32_TOL = 1e-4
PROMPTS = ["Compute: 12 + 30\nReply with: Answer: <integer>\n### solver\n", "### critic\nAnswer: 4"]
BIG = TinyModelSpec(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)


def _max_diff(a: HFPolicy, b: HFPolicy, completions: list[list[int]]) -> float:
    with torch.no_grad():
        la = a.logprobs(PROMPTS, completions)
        lb = b.logprobs(PROMPTS, completions)
    diff = (la.logprobs.float().cpu() - lb.logprobs.float().cpu()).abs()
    return float(diff[la.mask.cpu()].max())


def correctness(model_dir: Path, device: str) -> dict[str, Any]:
    """The four correctness checks; each entry has its value, tolerance and verdict."""
    cpu = HFPolicy.from_pretrained(model_dir)
    dev = HFPolicy.from_pretrained(model_dir, device=device)
    bf16 = HFPolicy.from_pretrained(model_dir, device=device, dtype="bfloat16")
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=1234)
    gens = cpu.generate(PROMPTS, sampling)
    completions = [list(g.token_ids) or [0] for g in gens]
    out: dict[str, Any] = {}
    fp32 = _max_diff(cpu, dev, completions)
    out["logprobs_fp32_vs_cpu"] = {"value": fp32, "tol": FP32_TOL, "ok": fp32 <= FP32_TOL}
    half = _max_diff(cpu, bf16, completions)
    out["logprobs_bf16_vs_cpu"] = {"value": half, "tol": BF16_TOL, "ok": half <= BF16_TOL}
    first = [g.text for g in dev.generate(PROMPTS * 4, sampling)]
    again = [g.text for g in dev.generate(PROMPTS * 4, sampling)]
    out["seeded_sampling_reproducible"] = {"value": first == again, "ok": first == again}
    # A checkpoint crosses devices both ways: train a step on one side, score on the other.
    for name, src, dst_device in (("device_to_cpu", dev, "cpu"), ("cpu_to_device", cpu, device)):
        _one_step(src, completions)
        state = {k: v.detach().cpu().clone() for k, v in src.state_dict().items()}
        dst = HFPolicy.from_pretrained(model_dir, device=dst_device)
        dst.load_state_dict(state)
        value = _max_diff(src, dst, completions)
        out[f"checkpoint_{name}"] = {"value": value, "tol": FP32_TOL, "ok": value <= FP32_TOL}
    return out


def _one_step(policy: HFPolicy, completions: list[list[int]]) -> None:
    opt = torch.optim.SGD(policy.parameters(), lr=1e-2)
    loss = -policy.logprobs(PROMPTS, completions).message_logprobs().sum()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_gb(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    return torch.cuda.max_memory_allocated() / 2**30


def throughput(model_dir: Path, device: str, batches: list[int], new_tokens: int) -> dict[str, Any]:
    """generate tokens/s per batch size and logprobs forward+backward tokens/s, in bfloat16 (float32
    on CPU, where bfloat16 matmuls are slow and not what a user runs)."""
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    policy = HFPolicy.from_pretrained(model_dir, device=device, dtype=dtype, micro_batch_size=256)
    params = sum(p.numel() for p in policy.parameters())
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sampling = SamplingParams(temperature=1.0, max_new_tokens=new_tokens, seed=0)
    policy.generate(PROMPTS[:1], sampling)  # warm-up
    rows = {}
    for batch in batches:
        prompts = [PROMPTS[i % 2] for i in range(batch)]
        _sync(device)
        start = time.perf_counter()
        gens = policy.generate(prompts, sampling)
        _sync(device)
        seconds = time.perf_counter() - start
        rows[str(batch)] = sum(len(g.token_ids) for g in gens) / seconds
    completions = [[5] * new_tokens for _ in range(max(batches))]
    prompts = [PROMPTS[i % 2] for i in range(len(completions))]
    _sync(device)
    start = time.perf_counter()
    lp = policy.logprobs(prompts, completions)
    lp.message_logprobs().sum().backward()
    _sync(device)
    backward_tps = len(completions) * new_tokens / (time.perf_counter() - start)
    return {
        "parameters": params,
        "dtype": dtype,
        "generate_tokens_per_s": rows,
        "logprobs_fwd_bwd_tokens_per_s": backward_tps,
        "peak_gpu_gb": _peak_gb(device),
    }


def team_layouts(model_dir: Path, device: str) -> dict[str, Any]:
    """Peak GPU memory of a 3-agent LoRA team (bfloat16 base) as separate copies and on one
    shared base, each after one forward and backward pass per agent (benchmarks/team_memory.py's
    GPU rows; on the CPU only the parameter bytes)."""
    import gc

    from team_memory import build_layout, param_bytes

    from teamtr_core.policy import LoraSettings

    dtype: DType = "bfloat16" if device.startswith("cuda") else "float32"
    lora = LoraSettings(r=16, alpha=32)
    completions = [[5] * 8 for _ in PROMPTS]
    out: dict[str, Any] = {"dtype": dtype, "agents": 3}
    for layout in ("separate", "shared"):
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        team, models = build_layout(layout, model_dir, lora, device=device, dtype=dtype)
        for policy in team.values():
            policy.logprobs(PROMPTS, completions).message_logprobs().sum().backward()
        _sync(device)
        out[layout] = {"param_bytes": param_bytes(models), "peak_gpu_gb": _peak_gb(device)}
        del team, models
    return out


def training_stage(model_dir: Path, device: str, problems: int) -> dict[str, Any]:
    """One TeamTR stage of a 3-agent team on teamtr/Arith-v0 with its time split."""
    import teamtr_env
    from teamtr_core.config import from_dict
    from trainers.config import TrainConfig
    from trainers.learners.team_trainer import TeamTrainer

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    config = from_dict(
        TrainConfig,
        {
            "task": "teamtr/Arith-v0",
            "task_options": {},
            "sft": None,
            "progress": False,
            "diagnostics": "off",
            "schedule": {"stages": 1, "problems_per_batch": problems, "group_size": 4},
        },
    )

    def env_fn() -> Any:
        return teamtr_env.make("teamtr/Arith-v0")

    agents = env_fn().possible_agents
    policies = {a: HFPolicy.from_pretrained(model_dir, device=device, dtype=dtype) for a in agents}
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trainer = TeamTrainer(config, env_fn, policies)
    start = time.perf_counter()
    report = trainer.run_stage()
    m = report.metrics
    return {
        "agents": len(agents),
        "rollouts": m["stage/rollouts"],
        "wall_s": time.perf_counter() - start,
        "rollout_s": m.get("stage/rollout_s", 0.0),
        "update_s": m.get("stage/update_s", 0.0),
        "monitor_s": m.get("stage/monitor_s", 0.0),
        "accepted_in_region": all(u.in_region for u in report.updates if u.accepted),
        "peak_gpu_gb": _peak_gb(device),
    }


def vllm_stage(model_dir: Path, device: str) -> dict[str, Any]:
    """One TeamTR stage with vLLM rollouts (benchmarks/vllm_check.py's), where vLLM is
    installed on a CUDA machine; otherwise the reason it did not run."""
    from adapters.vllm_policy import vllm_unavailable_reason

    reason = vllm_unavailable_reason()
    if reason is not None or not device.startswith("cuda"):
        return {"ran": False, "reason": reason or "needs a CUDA device"}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_check import teamtr_stage_with_vllm_rollouts

    return {"ran": True, **teamtr_stage_with_vllm_rollouts(model_dir)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny model and batches (CPU/CI)")
    parser.add_argument("--json", type=Path, default=None, help="default: OUT_DIR/gpu_check.json")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/gpu_check"))
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a GPU "
            "machine, or pass --device cpu --tiny to exercise the logic on the CPU."
        )
        return 2
    t0 = time.perf_counter()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    tiny_dir = build_tiny_model(args.out_dir / "tiny", TinyModelSpec())
    big_dir = tiny_dir if args.tiny else build_tiny_model(args.out_dir / "llama100m", BIG)
    batches, new_tokens, stage_problems = (
        ([1, 8, 16], 8, 4) if args.tiny else ([1, 64, 256], 64, 64)
    )
    result: dict[str, Any] = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(args.device) if args.device != "cpu" else "cpu",
        "torch": torch.__version__,
        "tiny": args.tiny,
        "correctness": correctness(tiny_dir, args.device),
        "throughput": throughput(big_dir, args.device, batches, new_tokens),
        "training_stage": training_stage(big_dir, args.device, stage_problems),
        "team_layouts": team_layouts(big_dir, args.device),
        "vllm_stage": vllm_stage(tiny_dir, args.device),
    }
    result["wall_s"] = time.perf_counter() - t0
    _print(result, batches)
    out = args.json or args.out_dir / "gpu_check.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0 if all(c["ok"] for c in result["correctness"].values()) else 1


def _print(result: dict[str, Any], batches: list[int]) -> None:
    print(f"device {result['device_name']} ({result['device']}), torch {result['torch']}")
    print("| check | value | tolerance | ok |\n|---|---|---|---|")
    for name, c in result["correctness"].items():
        print(f"| {name} | {c['value']} | {c.get('tol', '-')} | {c['ok']} |")
    t = result["throughput"]
    peak = t["peak_gpu_gb"]
    print(f"\nthroughput: {t['parameters'] / 1e6:.1f}M parameters, {t['dtype']}")
    print("| generate batch | tokens/s |\n|---|---|")
    for b in batches:
        print(f"| {b} | {t['generate_tokens_per_s'][str(b)]:,.0f} |")
    print(
        f"logprobs forward+backward: {t['logprobs_fwd_bwd_tokens_per_s']:,.0f} tokens/s; "
        f"peak GPU memory: {'-' if peak is None else f'{peak:.2f} GiB'}"
    )
    s = result["training_stage"]
    peak = s["peak_gpu_gb"]
    print(
        f"\none TeamTR stage ({s['agents']} agents, {s['rollouts']:.0f} rollouts): "
        f"{s['wall_s']:.1f} s = rollouts {s['rollout_s']:.1f} + updates {s['update_s']:.1f} "
        f"+ KL monitor {s['monitor_s']:.1f} (+ the rest); every accepted update in region: "
        f"{s['accepted_in_region']}; peak GPU memory: {'-' if peak is None else f'{peak:.2f} GiB'}"
    )
    lay = result["team_layouts"]
    print(f"\n3 LoRA agents ({lay['dtype']}), separate copies vs one shared base:")
    for layout in ("separate", "shared"):
        row = lay[layout]
        peak = row["peak_gpu_gb"]
        print(
            f"  {layout}: {row['param_bytes'] / 2**20:,.1f} MiB of parameters, peak GPU memory "
            f"{'-' if peak is None else f'{peak:.2f} GiB'}"
        )
    v = result["vllm_stage"]
    if v["ran"]:
        print(
            f"\none TeamTR stage with vLLM rollouts: {v['wall_s']:.1f} s, {v['syncs']:.0f} syncs, "
            f"largest engine-trainer log-prob gap {v['max_gap']:.2e}"
        )
    else:
        print(f"\nTeamTR stage with vLLM rollouts: not run ({v['reason']})")
    print(f"total {result['wall_s']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
