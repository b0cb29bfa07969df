"""Update memory: the peak memory of one training step of teamtr, beside TRL's GRPOTrainer.

Usage::

    .venv/bin/python benchmarks/update_memory.py [--json OUT] [--quick]

A step = sample P prompts x G generations of one-digit sums (``teamtr/Arith-v0``, a one-agent
team, 12 new tokens) with a char-level Llama, score them and make one AdamW update (full
weights, fp32, no gradient checkpointing, one epoch, lr 1e-4), at two settings, the same model
for every row of a setting:

- ``parameters``: about 201M parameters (hidden 1024, 12 layers, MLP 4096), 4 prompts x 2: the
  parameters, gradients and optimizer state dominate, as for every real agent;
- ``activations``: about 34M parameters (hidden 512, 8 layers, MLP 2048), 16 prompts x 4: the
  activations dominate.

Rows: teamtr with the trust region on (``delta_mode: fixed``) and off (``none``), and TRL's
``GRPOTrainer`` at equal settings (:data:`update_speed.TRL_SETTINGS`: fp32, no checkpointing,
``num_iterations=1``, ``beta=0``) when ``trl`` is importable (the ``peers`` extra, which
``make test`` installs; not a teamtr dependency). Each row runs in a fresh process and takes two steps: the first makes the
optimizer's state (AdamW's moments exist from the first step on), and the figure is the second
step's peak resident memory (``/proc/self/clear_refs`` resets the peak before it) over the
resident memory after the imports, the model load (every weight read once, so that the mapped
file's pages are resident) and the trainer's set-up, before the first step: what a run in progress holds beyond its loaded model (optimizer state, gradients,
activations, snapshots), in MB and in multiples of the parameter bytes. (Measured over the
memory just before the second step instead, the rows would differ in what each trainer keeps
between steps: HF's Trainer frees the gradients after a step, teamtr at the next one.)
glibc's malloc keeps every allocation above 128 KiB in its own mapping in every row
(``MALLOC_MMAP_THRESHOLD_``), so the resident memory follows what is alive.

Two more rows take one update of a fixed batch (no sampling; trust region on), unsharded and on
a gang of 2 ranks sharded with FSDP2 (gloo, two processes): the sharded figure is each rank's
peak over its memory after loading and sharding (the larger of the two).

``--quick`` runs a 4M-parameter model at both settings' batches (a smoke run for the tests).
``--model DIR`` measures a real model instead (e.g. ``models/smollm2-135m-instruct``, written by
``teamtr models get smollm2-135m-instruct``): the three step rows at ``--batch`` (8x4), with
``--threads`` torch threads; TRL gets the model's chat template as teamtr does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import markdown_table, peak_rss_bytes, reset_peak_rss, write_outputs

#: The two settings: the model's size and the batch.
SETTINGS: dict[str, dict[str, int]] = {
    "parameters": {
        "hidden_size": 1024,
        "num_layers": 12,
        "num_heads": 16,
        "intermediate_size": 4096,
        "prompts": 4,
        "generations": 2,
    },
    "activations": {
        "hidden_size": 512,
        "num_layers": 8,
        "num_heads": 8,
        "intermediate_size": 2048,
        "prompts": 16,
        "generations": 4,
    },
}
QUICK = {"hidden_size": 256, "num_layers": 4, "num_heads": 4, "intermediate_size": 1024}
ARMS = ("teamtr, trust region on", "teamtr, trust region off", "TRL GRPOTrainer")
UPDATE_ARMS = ("one update, unsharded", "one update, 2 shards (each rank)")
NEW_TOKENS, LR, TEMPERATURE = 12, 1e-4, 0.8
THREADS = 1
"""torch threads of every row (``--threads``; passed on to each row's fresh process)."""
MMAP_THRESHOLD = 131072
"""Bytes above which every allocation gets its own mapping (glibc's default threshold grows with
freed blocks, which then stay resident and hide later peaks)."""


def build_model(folder: Path, setting: dict[str, int]) -> Path:
    """A char-level Llama of ``setting``'s size, saved in ``folder``."""
    from adapters.tiny import TinyModelSpec, build_tiny_model

    keys = ("hidden_size", "num_layers", "num_heads", "intermediate_size")
    return build_tiny_model(folder, TinyModelSpec(**{k: setting[k] for k in keys}))


def resident(model: Any) -> None:
    """Reads every weight once: transformers maps a saved model's file and its pages become
    resident only when first read, which would count the weights themselves in a step's peak."""
    for p in model.parameters():
        float(p.detach().sum())


def _teamtr(model_dir: Path, prompts: int, generations: int, trust_region: bool) -> Any:
    """A one-agent TeamTrainer on the model: its stage is the step."""
    from update_speed import OPTIONS, TASK, make_env

    from adapters.hf import HFPolicy
    from teamtr_core.config import from_dict
    from trainers.config import TrainConfig
    from trainers.learners.team_trainer import TeamTrainer

    config = from_dict(
        TrainConfig,
        {
            "task": TASK,
            "task_options": OPTIONS,
            "sampling": {"temperature": TEMPERATURE, "max_new_tokens": NEW_TOKENS},
            "sft": None,
            "diagnostics": "off",
            "progress": False,
            "schedule": {"stages": 2, "problems_per_batch": prompts, "group_size": generations},
            "optim": {"lr": LR, "epochs": 1, "micro_batch_size": prompts * generations},
            "trust_region": {"delta_mode": "fixed" if trust_region else "none", "beta": 0.0},
        },
        what="update_memory config",
    )
    policy = HFPolicy.from_pretrained(model_dir)
    resident(policy.model)
    trainer = TeamTrainer(config, make_env, {"solver": policy})

    def steps(measure: Any) -> None:
        trainer.run_stage()  # the first step makes the optimizer's state
        measure()
        trainer.run_stage()

    return steps


def _trl(model_dir: Path, prompts: int, generations: int) -> Any:
    """TRL's GRPOTrainer at teamtr's settings, one step (``None``: trl is not installed)."""
    try:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        return None
    import numpy as np
    from update_speed import TRL_REPORTED, TRL_SETTINGS, _effective, make_env, trl_prompts, trl_text

    env = make_env()
    rng = np.random.default_rng(0)
    problems, contexts = [], []
    for _ in range(2 * prompts):
        problem = env.task.sample(rng)
        env.reset(seed=0, options={"problem": problem})
        problems.append(problem)
        contexts.append(env.context("solver"))
    by_context = dict(zip(contexts, problems))

    def reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [
            env.task.grade(by_context[trl_text(p)], trl_text(c)).reward
            for p, c in zip(prompts, completions)
        ]

    config = GRPOConfig(
        **TRL_SETTINGS,
        output_dir=tempfile.mkdtemp(prefix="trl-"),
        per_device_train_batch_size=prompts * generations,
        num_generations=generations,
        steps_per_generation=1,
        max_completion_length=NEW_TOKENS,
        temperature=TEMPERATURE,
        learning_rate=LR,
        max_steps=2,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
        logging_steps=10_000,
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    resident(model)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": trl_prompts(contexts, tokenizer)}),
        processing_class=tokenizer,
    )

    def steps(measure: Any) -> None:
        class Second(TrainerCallback):  # type: ignore[misc]
            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.global_step == 1:  # the first step made the optimizer's state
                    measure()

        trainer.add_callback(Second())
        trainer.train()

    steps.settings = _effective(trainer.args, TRL_REPORTED)  # type: ignore[attr-defined]
    return steps


def run_arm(arm: str, model_dir: Path, prompts: int, generations: int) -> dict[str, Any] | None:
    """One row, in this process: the set-up, then the step's peak over the memory before it."""
    import torch

    torch.set_num_threads(THREADS)
    if arm == "TRL GRPOTrainer":
        step = _trl(model_dir, prompts, generations)
        if step is None:
            return None
    else:
        step = _teamtr(model_dir, prompts, generations, trust_region=arm.endswith("on"))
    base = reset_peak_rss()
    step(reset_peak_rss)  # the peak of the second step only
    peak = peak_rss_bytes()
    result = {"base_bytes": base, "peak_bytes": peak, "step_bytes": peak - base}
    if hasattr(step, "settings"):  # the peer's effective settings
        result["settings"] = step.settings
    return result


def _fixed_batch(prompts: int, generations: int) -> tuple[list[Any], Any]:
    """The solver's contexts of ``prompts`` sums, ``generations`` fixed completions each, and
    advantages: one update's batch without sampling (the same on every rank)."""
    import numpy as np
    import torch
    from update_speed import make_env

    from teamtr_env.rollout import MessageRecord

    env = make_env()
    rng = np.random.default_rng(0)
    messages = []
    for i in range(prompts):
        env.reset(seed=0, options={"problem": env.task.sample(rng)})
        context = env.context("solver")
        for g in range(generations):
            text = f"Answer: {(7 * i + g) % 19}"[:NEW_TOKENS]
            messages.append(MessageRecord(len(messages), i, 0, "solver", context, text, ()))
    advantages = torch.tensor([(-1.0) ** k for k in range(len(messages))])
    return messages, advantages


def _update_twice(policy: Any, group: Any, prompts: int, generations: int) -> dict[str, Any]:
    """Two accepted updates with the trust region on (the first makes the optimizer's state);
    the second's peak over the memory before the first."""
    import torch

    from trainers.config import OptimConfig, TrustRegionConfig
    from trainers.optim.collective import Share
    from trainers.optim.update import update_agent

    optimizer = torch.optim.AdamW(policy.parameters(), lr=LR)
    fixed, advantages = _fixed_batch(prompts, generations)
    messages = Share(fixed, group)  # this rank's share of the batch (the whole on one process)
    optim = OptimConfig(epochs=1, lr=LR, micro_batch_size=prompts * generations)
    # a radius this fixed batch's step stays inside: the typical accepted update
    kwargs = {"beta": 0.0, "delta": 1.0, "optim": optim, "region": TrustRegionConfig()}
    base = reset_peak_rss()
    update_agent(policy, optimizer, messages, advantages, **kwargs)
    reset_peak_rss()
    update_agent(policy, optimizer, messages, advantages, **kwargs)
    peak = peak_rss_bytes()
    return {"base_bytes": base, "peak_bytes": peak, "step_bytes": peak - base}


def _rank(rank: int, world: int, model_dir: str, batch: str, port: int, out: str) -> None:
    """One rank of the sharded arm (a torch.multiprocessing process)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from adapters.hf import HFPolicy
    from trainers.optim.collective import TorchGroup
    from trainers.optim.sharding import shard_policy

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(THREADS)
    prompts, generations = (int(x) for x in batch.split("x"))
    policy = HFPolicy.from_pretrained(model_dir)
    resident(policy.model)
    shard_policy(policy, init_device_mesh("cpu", (world,)))
    result = _update_twice(policy, TorchGroup(), prompts, generations)
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


def run_update_arm(arm: str, model_dir: Path, prompts: int, generations: int) -> dict[str, Any]:
    """One update of a fixed batch, unsharded or on 2 ranks (each rank's figure; the largest)."""
    import torch

    from trainers.optim.collective import SOLO

    torch.set_num_threads(THREADS)
    if arm == UPDATE_ARMS[0]:
        from adapters.hf import HFPolicy

        policy = HFPolicy.from_pretrained(model_dir)
        resident(policy.model)
        return _update_twice(policy, SOLO, prompts, generations)
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as scratch:
        batch = f"{prompts}x{generations}"
        mp.spawn(_rank, args=(2, str(model_dir), batch, port, scratch), nprocs=2)
        ranks = [json.loads(Path(scratch, f"rank{r}.json").read_text()) for r in (0, 1)]
    worst = max(ranks, key=lambda r: r["step_bytes"])
    return {**worst, "ranks": ranks}


def measure(arm: str, model_dir: Path, prompts: int, generations: int) -> dict[str, Any] | None:
    """:func:`run_arm` in a fresh process (``None``: the arm cannot run here)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "arm.json"
        command = [
            sys.executable,
            __file__,
            "--arm",
            arm,
            "--model",
            str(model_dir),
            "--batch",
            f"{prompts}x{generations}",
            "--arm-out",
            str(out),
            "--threads",
            str(THREADS),
        ]
        env = {
            **os.environ,
            "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
            "TRANSFORMERS_VERBOSITY": "error",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
        subprocess.run(command, check=True, env=env)
        result: dict[str, Any] | None = json.loads(out.read_text())
        return result


def parameter_bytes(model_dir: Path) -> int:
    """The model's parameters in bytes (fp32)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def run_setting(name: str, setting: dict[str, int], folder: Path) -> dict[str, Any]:
    """Every arm of one setting on one model."""
    model_dir = build_model(folder / name, setting)
    result = run_model(model_dir, setting["prompts"], setting["generations"], ARMS + UPDATE_ARMS)
    model = {k: setting[k] for k in ("hidden_size", "num_layers", "intermediate_size")}
    return {"model": model, **result}


def run_model(model_dir: Path, prompts: int, generations: int, arms: tuple[str, ...]) -> dict:
    """The ``arms`` on the model in ``model_dir`` at a batch of ``prompts`` x ``generations``."""
    params = parameter_bytes(model_dir)
    rows: dict[str, Any] = {}
    for arm in arms:
        result = measure(arm, model_dir, prompts, generations)
        if result is not None:
            result["x_params"] = result["step_bytes"] / params
        rows[arm] = result
    return {
        "parameters": params // 4,
        "parameter_bytes": params,
        "batch": f"{prompts} prompts x {generations}",
        "rows": rows,
        **_ratios(rows),
    }


def _ratios(rows: dict[str, Any]) -> dict[str, float | None]:
    """teamtr over TRL, and what the trust region adds, in multiples of the off row."""
    on, off, trl = (rows.get(a) for a in ARMS)
    out: dict[str, float | None] = {"on_over_trl": None, "off_over_trl": None}
    if trl:
        out["on_over_trl"] = on["step_bytes"] / trl["step_bytes"] if on else None
        out["off_over_trl"] = off["step_bytes"] / trl["step_bytes"] if off else None
    out["trust_region_x_params"] = on["x_params"] - off["x_params"] if on and off else None
    whole, sharded = (rows.get(a) for a in UPDATE_ARMS)
    out["shard_over_unsharded"] = (
        sharded["step_bytes"] / whole["step_bytes"] if whole and sharded else None
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--quick", action="store_true", help="a 4M-parameter smoke run")
    parser.add_argument(
        "--model",
        type=Path,
        help="measure this Hugging Face model directory instead of the two built settings (e.g. "
        "models/smollm2-135m-instruct): the three step rows, at --batch",
    )
    parser.add_argument(
        "--batch", default="8x4", help="with --model: prompts x generations of a step (8x4)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every row")
    parser.add_argument("--arm", choices=ARMS + UPDATE_ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--arm-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global THREADS
    THREADS = args.threads
    prompts, generations = (int(x) for x in args.batch.split("x"))
    if args.arm:  # one row, in this (fresh) process
        run = run_update_arm if args.arm in UPDATE_ARMS else run_arm
        args.arm_out.write_text(json.dumps(run(args.arm, args.model, prompts, generations)))
        return 0
    settings = {k: {**v, **QUICK} for k, v in SETTINGS.items()} if args.quick else SETTINGS
    if args.model:
        results = {args.model.name: run_model(args.model, prompts, generations, ARMS)}
    else:
        with tempfile.TemporaryDirectory() as scratch:
            results = {name: run_setting(name, s, Path(scratch)) for name, s in settings.items()}
    for name, r in results.items():
        table = []
        for arm, row in r["rows"].items():
            cells = ["not installed", "-"] if row is None else [
                f"{row['step_bytes'] / 1e6:,.0f}", f"{row['x_params']:.2f}x"
            ]  # fmt: skip
            table.append([arm, *cells])
        title = (
            f"{name}: {r['parameters'] / 1e6:.0f}M parameters, {r['batch']}; a step's peak over the "
            "loaded model (fp32, AdamW, one epoch)"
        )
        print(markdown_table(title, ["row", "MB", "x parameter bytes"], table))
        if r["off_over_trl"] is not None:
            print(
                f"teamtr / TRL: trust region off {r['off_over_trl']:.2f}, on "
                f"{r['on_over_trl']:.2f}; the trust region adds "
                f"{r['trust_region_x_params']:.2f}x the parameter bytes"
            )
        if r["shard_over_unsharded"] is not None:
            print(
                "one update (trust region on) on 2 shards: each rank's peak is "
                f"{r['shard_over_unsharded']:.2f}x the unsharded update's\n"
            )
    data = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch_threads": THREADS,
        },
        "settings": {"new_tokens": NEW_TOKENS, "lr": LR, "epochs": 1, "dtype": "float32"},
        "malloc_mmap_threshold": MMAP_THRESHOLD,
        "results": results,
    }
    write_outputs(args.json, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
