"""Team memory and scale: separate LoRA copies against one shared base, and one training stage
in this process against an agent actor per agent.

On a Llama built locally (nothing is downloaded; about 34M parameters, ``--quick`` about 10M) and
a 3-agent team of LoRA agents:

* **parameter bytes** of one agent, of three separate LoRA copies and of the shared-base team
  (``SharedLoraBase``: one frozen base, an adapter per agent);
* **peak resident memory** of a fresh process that builds each layout and runs one forward and
  backward pass per agent (``VmHWM``, reset after torch and transformers are imported, where
  Linux allows it; ``ru_maxrss`` elsewhere), with the resident memory before the model is
  loaded beside it;
* **one TeamTR stage** of the shared-base team, with the updates in the driver process and with
  an agent actor per agent on a local Ray (``runner.agents: ray``): its wall time, and the
  driver's parameter bytes and peak resident memory over its baseline (each in a fresh
  process; with agent actors the driver loads no model);
* **projected GPU memory** of 3 x 7B agents under each layout, with its assumptions printed.

The GPU rows (peak CUDA memory of each layout) stay "not yet run" here: ``benchmarks/gpu_check.py``
measures them on a GPU machine.

Usage::

    python benchmarks/team_memory.py [--quick] [--json OUT]

Prints a table and writes JSON (default ``runs/team_memory.json``) with ``one_agent``,
``separate`` and ``shared`` (each ``param_bytes``, ``peak_rss_bytes``, ``baseline_rss_bytes``),
``stage`` (``local`` and ``learner_actors``: seconds, ``driver_param_bytes``,
``driver_peak_rss_bytes``, ``driver_baseline_rss_bytes``), ``projection`` and ``gpu``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bench import peak_rss_bytes, reset_peak_rss  # noqa: E402

if TYPE_CHECKING:
    from adapters.hf import DType

AGENTS = ("solver", "critic", "aggregator")
LAYOUTS = ("one_agent", "separate", "shared")
LORA = {"r": 16, "alpha": 32}
#: (hidden, layers, heads, intermediate) of the locally built model.
FULL_SPEC = (512, 8, 8, 2048)  # ~34M parameters
QUICK_SPEC = (384, 4, 6, 1536)  # ~10M parameters


def measure_layout(layout: str, model: Path) -> dict[str, Any]:
    """Builds ``layout`` in this (fresh) process, runs a forward and backward pass per agent,
    and returns its parameter bytes and peak resident memory."""
    import torch

    from teamtr_core.policy import LoraSettings

    torch.set_num_threads(1)
    lora = LoraSettings(**LORA)  # type: ignore[arg-type]
    _warm_up(lora)
    baseline = reset_peak_rss()
    team, models = build_layout(layout, model, lora)
    size = param_bytes(models)
    prompts = ["Compute: 12 + 30\n### solver\n"] * 4
    for policy in team.values():
        loss = -policy.logprobs(prompts, ["Answer: 42"] * 4).message_logprobs().sum()
        loss.backward()
    return {
        "param_bytes": size,
        "peak_rss_bytes": peak_rss_bytes(),
        "baseline_rss_bytes": baseline,
    }


def build_layout(
    layout: str, model: Path, lora: Any, *, device: str = "cpu", dtype: DType = "float32"
) -> tuple[dict[str, Any], list[Any]]:
    """The LoRA team of ``layout`` (``one_agent``, ``separate`` copies or one ``shared`` base)
    on ``model``: its policies, and the models that hold its parameters (also
    ``benchmarks/gpu_check.py``'s GPU rows)."""
    from adapters.hf import HFPolicy
    from adapters.shared_lora import SharedLoraBase

    if layout == "shared":
        base = SharedLoraBase.from_pretrained(model, device=device, dtype=dtype)
        return {a: base.add_agent(a, lora=lora) for a in AGENTS}, [base.model]
    agents = AGENTS[:1] if layout == "one_agent" else AGENTS
    team = {
        a: HFPolicy.from_pretrained(model, device=device, dtype=dtype, lora=lora) for a in agents
    }
    return team, [p.model for p in team.values()]


def param_bytes(models: Iterable[Any]) -> int:
    """The bytes of the parameters of ``models``."""
    return sum(p.numel() * p.element_size() for m in models for p in m.parameters())


def _warm_up(lora: Any) -> None:
    """Loads, runs and drops a 0.55M-parameter model once, so that what the first load imports
    lazily (transformers' model code, peft) is resident before the baseline is taken."""
    import gc

    from adapters.hf import HFPolicy
    from adapters.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        policy = HFPolicy.from_pretrained(build_tiny_model(Path(tmp) / "warm"), lora=lora)
        policy.logprobs(["a"], ["b"]).message_logprobs().sum().backward()
    del policy
    gc.collect()


def _in_subprocess(what: str, *args: str) -> dict[str, Any]:
    """This script run again with ``args`` in a fresh process (a clean measure of its memory):
    the JSON object it prints last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(Path(__file__)), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure_stage(model: Path, backend: str, work: Path) -> dict[str, Any]:
    """One TeamTR stage of the shared-base team (no warm start) in this (fresh) process, with
    the updates here or in an agent actor per agent: the stage's wall time and its split, and
    this driver process's parameter bytes and peak resident memory over its baseline (taken
    once torch, transformers, peft and, for the actors, a local Ray are up)."""
    from rich.console import Console

    from teamtr_core.config import from_dict
    from teamtr_core.policy import LoraSettings
    from trainers.config import TrainConfig
    from trainers.run.recipe import TrainingRecipe

    config = from_dict(
        TrainConfig,
        {
            "task": "teamtr/Pipeline-v0",
            "team": {
                "shared_base": True,
                "default": {"backend": "hf", "path": str(model), "lora": LORA},
            },
            "sft": None,
            "sampling": {"max_new_tokens": 8},
            "schedule": {"stages": 1, "problems_per_batch": 4, "group_size": 2},
            "runner": {"agents": backend, "agent_cpus": 0.5},
            "eval": {"problems": 4, "k": 1, "train_distribution": False},
            "loggers": [],
            "plot": False,
            "progress": False,
            "run_dir": str(work / f"stage-{backend}"),
        },
    )
    _warm_up(LoraSettings(**LORA))  # type: ignore[arg-type]
    if backend == "ray":
        from teamtr_env.runners.ray import init_ray

        init_ray()
    baseline = reset_peak_rss()
    recipe = TrainingRecipe(config, console=Console(file=io.StringIO()))
    recipe.run()
    # what the driver holds: its policies' models (a shared base once; an ActorPolicy has none)
    models = {id(m): m for p in recipe.policies.values() if (m := getattr(p, "model", None))}
    rows = [json.loads(line) for line in (work / f"stage-{backend}" / "metrics.jsonl").open()]
    stage = next(r for r in rows if "stage/wall_s" in r)
    keys = ("wall_s", "rollout_s", "update_s", "monitor_s")
    out: dict[str, Any] = {k: float(stage[f"stage/{k}"]) for k in keys if f"stage/{k}" in stage}
    out["driver_param_bytes"] = param_bytes(models.values())
    out["driver_peak_rss_bytes"] = peak_rss_bytes()
    out["driver_baseline_rss_bytes"] = baseline
    return out


def projection() -> dict[str, Any]:
    """GPU memory of 3 x 7B agents under each layout (weights and training state; activations
    and the KV cache excluded), with the assumptions."""
    params = 7.62e9  # Qwen2.5-7B
    layers, hidden, kv = 28, 3584, 512  # its attention: q, o hidden x hidden; k, v hidden x kv
    r = LORA["r"]
    adapter = layers * r * ((hidden + hidden) * 2 + (hidden + kv) * 2)  # q, o, k, v
    base_gb = params * 2 / 1e9  # bfloat16 weights
    adapter_state_gb = adapter * 16 / 1e9  # fp32 weights, gradients, Adam's two moments
    full_state_gb = params * 16 / 1e9  # bf16 weights + grads, fp32 master + Adam (mixed precision)
    return {
        "assumptions": [
            "Qwen2.5-7B: 7.62e9 parameters, 28 layers, hidden 3584, key/value width 512",
            "base weights in bfloat16 (2 bytes per parameter), frozen",
            f"LoRA r={r} on q, k, v, o: {adapter / 1e6:.1f}M parameters per agent, trained in "
            "float32 with AdamW: 16 bytes per parameter (weights, gradients, two moments)",
            "full fine-tuning: 16 bytes per parameter (bf16 weights and gradients, fp32 master "
            "weights and two Adam moments)",
            "activations, the KV cache and the reference policy excluded",
        ],
        "agents": 3,
        "adapter_params": adapter,
        "gb": {
            "separate_lora_one_gpu": 3 * (base_gb + adapter_state_gb),
            "shared_base_one_gpu": base_gb + 3 * adapter_state_gb,
            "learner_actors_lora_per_gpu": base_gb + adapter_state_gb,
            "full_finetune_one_gpu": 3 * full_state_gb,
            "learner_actors_full_finetune_per_gpu": full_state_gb,
        },
    }


def run(quick: bool) -> dict[str, Any]:
    from adapters.tiny import TinyModelSpec, build_tiny_model

    hidden, layers, heads, inter = QUICK_SPEC if quick else FULL_SPEC
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = TinyModelSpec(
            hidden_size=hidden, num_layers=layers, num_heads=heads, intermediate_size=inter
        )
        model = build_tiny_model(work / "model", spec)
        result: dict[str, Any] = {
            "model": {"hidden": hidden, "layers": layers, "heads": heads, "intermediate": inter},
            "lora": LORA,
            "agents": len(AGENTS),
        }
        for layout in LAYOUTS:
            print(f"measuring {layout} ...", flush=True)
            result[layout] = _in_subprocess(
                f"measuring {layout}", "--measure", layout, "--model", str(model)
            )
        result["stage"] = {}
        for key, backend, what in (
            ("local", "local", "updates in the driver"),
            ("learner_actors", "ray", "an agent actor per agent on a local Ray"),
        ):
            print(f"one stage, {what} ...", flush=True)
            result["stage"][key] = _in_subprocess(
                f"the {backend} stage",
                "--stage",
                backend,
                "--model",
                str(model),
                "--work",
                str(work),
            )
    result["projection"] = projection()
    result["gpu"] = {"status": "not yet run", "how": "python benchmarks/gpu_check.py (layouts)"}
    result["quick"] = quick
    result["command"] = "python benchmarks/team_memory.py" + (" --quick" if quick else "")
    result["seconds"] = time.perf_counter() - t0
    return result


def _mb(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def print_table(result: dict[str, Any]) -> None:
    one = result["one_agent"]
    m = result["model"]
    print(
        f"\nmodel: hidden {m['hidden']}, {m['layers']} layers; LoRA r={result['lora']['r']}; "
        f"{result['agents']} agents"
    )
    print("| layout | parameters | x one agent | peak RSS | RSS over baseline |")
    print("|---|---|---|---|---|")
    for layout in LAYOUTS:
        row = result[layout]
        over = row["peak_rss_bytes"] - row["baseline_rss_bytes"]
        ratio = row["param_bytes"] / one["param_bytes"]
        print(
            f"| {layout} | {_mb(row['param_bytes'])} | {ratio:.2f} | "
            f"{_mb(row['peak_rss_bytes'])} | {_mb(over)} |"
        )
    stage = result["stage"]
    print(
        "\n| one TeamTR stage | wall s | rollouts s | updates s | KL monitor s "
        "| driver's parameters | driver's peak RSS over baseline |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, row in (
        ("updates in the driver", stage["local"]),
        ("agent actors", stage["learner_actors"]),
    ):
        cells = [
            f"{row.get(k, float('nan')):.2f}"
            for k in ("wall_s", "rollout_s", "update_s", "monitor_s")
        ]
        over = row["driver_peak_rss_bytes"] - row["driver_baseline_rss_bytes"]
        cells += [_mb(row["driver_param_bytes"]), _mb(over)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    proj = result["projection"]
    print("\nprojected GPU memory, 3 x 7B agents (GB):")
    for name, gb in proj["gb"].items():
        print(f"  {name:40s} {gb:7.1f}")
    print("assumptions:")
    for line in proj["assumptions"]:
        print(f"  - {line}")
    print(f"GPU rows: {result['gpu']['status']} ({result['gpu']['how']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller model (under 2 minutes)")
    parser.add_argument("--json", type=Path, default=Path("runs/team_memory.json"))
    parser.add_argument("--measure", choices=LAYOUTS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stage", choices=("local", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # the subprocess that measures one layout
        print(json.dumps(measure_layout(args.measure, args.model)))
        return 0
    if args.stage:  # the subprocess that runs one stage
        print(json.dumps(measure_stage(args.model, args.stage, args.work)))
        return 0
    result = run(args.quick)
    print_table(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.json} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
